from diagnose.cli import main

main()
