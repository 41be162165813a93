from tableswap.cli import main

main()
