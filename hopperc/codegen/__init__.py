"""Code generation: lowered IR -> self-contained CUDA C++ and launch metadata."""
