from hybridrag.mcp.server import main

main()
