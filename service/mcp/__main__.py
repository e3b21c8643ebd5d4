from hybridrag.mcp import main

main()
