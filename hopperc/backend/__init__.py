"""Back end: NVRTC compilation and cubin inspection."""
