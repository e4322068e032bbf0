from hopperc.cli import main

main()
