"""The index's stores: keyword (tantivy), vectors (LanceDB + serving files), graph, tables, versions, remote."""
