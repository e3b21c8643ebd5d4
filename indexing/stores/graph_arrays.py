"""The graph as it is stored and as the service reads it: flat arrays and memory-mapped Arrow tables.

From format 7 they are the graph's only copy (`GraphArrays.graph` reads it back whole: relations keep their
PMI and evidence, synonym edges their similarity); versions before held a JSON record beside them
(graph.json.gz, ~1.6 KB a SciFact chunk), which `GraphData.load` still reads. The service maps them instead
of parsing a record into objects (at 12.5k chunks the parsed graph held ~30 KB a chunk):

    entities.arrow, relations.arrow   one row per entity / relation (uncompressed Arrow IPC, mapped; repeated
                                      strings as dictionaries, `SHARED_STRINGS`)
    synonyms.arrow                    the synonym edges (source, target, similarity; format 7)
    *.keys.npy                        id -> row lookups (`keys.KeyIndex`): entity ids, relation ids, names
    transition.*.npy                  the walk's CSR matrix (data, indices, indptr): each row the out-edges'
                                      probabilities, heaviest first (format 4 held it transposed). Every
                                      edge is stored both ways, so a row's entries are all of the node's
                                      neighbours (`GraphArrays.neighbours`); until format 7 an adjacency
                                      matrix of the same structure was stored beside it, unread since
    pairs.npy, synonyms.npy           sorted entity-pair keys: the relation of an edge, synonym edges
    entity_relations.*.npy            each entity's relations, most frequent first (CSR)
    relation_pairs.npy                the pair key of each relation row
    chunk_relations.*.npy             each chunk's relations (those with a sentence in it), by row (CSR)
    entity_rank.npy, entity_chunks.npy per entity: its place by (most mentioned, id), how many chunks name it
    name_entity.npy                   the entity of each name form in name.keys.npy
    communities.arrow                 the community reports (few, but their member lists grow with the corpus)
    chunks.arrow (+ .chunk_id.keys)   the chunk ids of the chunk nodes, in node order (format 6)
    meta.json                         format and counts

Node i < entities is entity i; node entities + j is the chunk at row j of `chunks.arrow`: the chunk table's
order when the graph was built. A write that leaves the graph behind (`builds.stages`, until a merge) keeps
it as it is; the service then maps graph rows to table rows by id (`graph_order.table_rows`).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from scipy import sparse

from hybridrag.indexing.analysis.entities import normalize_name
from hybridrag.indexing.stores.csr import index_type
from hybridrag.indexing.stores.graph import ARRAYS, Community, Entity, GraphData, Relation, Synonym, as_record
from hybridrag.indexing.stores.graph_order import ChunkOrder, list_rows
from hybridrag.indexing.stores.graph_weights import heaviest_first, walk_matrices
from hybridrag.indexing.stores.keys import KeyIndex
from hybridrag.indexing.stores.mapped import IdList, checked_rows, take_pylist, write_id_list
from hybridrag.indexing.stores.memory_maps import Mappings

FOLDER = ARRAYS  # in a version's graph/
# 3: chunk_relations and relation_pairs; 4: the entities' concept flag; 5: transition by row; 6: the graph's
# own chunk order (a graph can serve a later version of the chunk table); 7: repeated strings dictionary-encoded
# (`SHARED_STRINGS`) and row arrays int32 where they fit (SciFact: the graph, arrays and record, 8.2 -> 4.4 KB a chunk)
# 8: no adjacency matrix (the transition's structure is the same: 0.45-0.6 KB a chunk)
FORMAT = 8
READABLE = (4, 5, 6, 7, 8)  # a format-4 transition (transposed) is turned around when mapped
CHUNK_ORDER = "chunks.arrow"
LIST_HEAD = 20  # ids of each kind a graph result lists (with how many there are)

ENTITY_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("name", pa.string()),
        ("type", pa.string()),
        ("mentions", pa.int32()),
        ("chunk_ids", pa.list_(pa.string())),
        ("file_ids", pa.list_(pa.string())),
        ("description", pa.string()),
        ("aliases", pa.list_(pa.string())),
        ("title_chunk_ids", pa.list_(pa.string())),
        ("article", pa.bool_()),
        ("concept", pa.bool_()),
        ("community", pa.string()),
    ]
)
COMMUNITY_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("level", pa.int64()),
        ("title", pa.string()),
        ("entity_ids", pa.list_(pa.string())),
        ("relation_ids", pa.list_(pa.string())),
        ("chunk_ids", pa.list_(pa.string())),
        ("file_ids", pa.list_(pa.string())),
        ("report", pa.string()),
    ]
)
RELATION_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("source", pa.string()),
        ("target", pa.string()),
        ("count", pa.int32()),
        ("chunk_ids", pa.list_(pa.string())),
        # What the graph's record held beside (format 7, which has no other record): the pair's PMI, rounded
        # to 4 places as built, and its evidence, a chunk and the sentence's start and end in it, each.
        ("pmi", pa.float32()),
        ("evidence_chunk_ids", pa.list_(pa.string())),
        ("evidence_spans", pa.list_(pa.int32())),  # start, end of each evidence in turn
    ]
)
SYNONYM_SCHEMA = pa.schema([("source", pa.string()), ("target", pa.string()), ("similarity", pa.float64())])


#: The columns of each table whose strings repeat from row to row (chunk, file and entity ids, types, a sentence
#: that describes every entity it names): stored once each, rows holding int32 indices (Arrow dictionaries; a
#: reader sees the strings). Ids and names, one a row, stay plain.
SHARED_STRINGS = {
    "entities": ("type", "chunk_ids", "file_ids", "description", "title_chunk_ids", "community"),
    "relations": ("source", "target", "chunk_ids", "evidence_chunk_ids"),
    "communities": ("chunk_ids", "file_ids"),  # an entity or relation is in one community: its id once
}


def shared_strings(table: pa.Table, columns: Sequence[str]) -> pa.Table:
    """`table` with each of `columns` (strings, or lists of strings) dictionary-encoded: one dictionary per
    column, as an IPC file stores it (one record batch)."""
    table = table.combine_chunks()
    for name in columns:
        i = table.schema.get_field_index(name)
        column = table.column(i).combine_chunks()
        if pa.types.is_list(column.type):
            mask = column.is_null() if column.null_count else None
            encoded: pa.Array = pa.ListArray.from_arrays(
                column.offsets, column.values.dictionary_encode(), mask=mask
            )
        else:
            encoded = column.dictionary_encode()
        table = table.set_column(i, pa.field(name, encoded.type), encoded)
    return table


def load_graph(folder: Path) -> tuple[GraphData, np.ndarray | None]:
    """A version's graph (`folder`: its graph/) and its reports' vectors: from the arrays from format 7,
    else from the JSON record older versions held."""
    if (GraphArrays.format_of(folder / FOLDER) or 0) >= 7:
        return GraphArrays.graph(folder / FOLDER), GraphData.load_community_vectors(folder)
    return GraphData.load(folder)


def entity_ids(folder: Path) -> list[str]:
    """The ids of a version's entities in the graph's order (`folder`: its graph/), without reading the
    rest of the graph where its arrays hold it (from format 7)."""
    if (GraphArrays.format_of(folder / FOLDER) or 0) >= 7:
        import pyarrow.feather as feather

        ids = feather.read_table(folder / FOLDER / "entities.arrow", columns=["id"], memory_map=True)
        return [str(i) for i in ids.column("id").to_pylist()]
    return [e.id for e in GraphData.load(folder)[0].entities]


def name_forms(name: str, aliases: Sequence[str]) -> list[str]:
    """The spellings a query matches an entity by (normalised name and aliases)."""
    return sorted({normalize_name(name), *(normalize_name(a) for a in aliases)})


@dataclass(slots=True)
class GraphArrays:
    entities: pa.Table
    relations: pa.Table
    communities: pa.Table  # one row per community report, in the graph's order
    community_keys: KeyIndex
    entity_keys: KeyIndex
    relation_keys: KeyIndex
    name_keys: KeyIndex
    name_entity: np.ndarray  # the entity row of each name form (rows of `name_keys`)
    transition: sparse.csr_matrix  # P = D^-1 A, each row's entries heaviest first
    pair_keys: np.ndarray  # sorted lower * entities + higher entity row, one per relation
    pair_rows: np.ndarray  # the relation row of each pair key
    synonym_keys: np.ndarray  # sorted pair keys of synonym edges
    relations_indptr: np.ndarray  # entity row -> its slice of relations_rows
    relations_rows: np.ndarray  # relation rows, per entity most frequent first (then by id)
    relation_pairs: np.ndarray  # per relation row: its pair key (lower * entities + higher entity row)
    chunk_relations_indptr: np.ndarray  # chunk row -> its slice of chunk_relations_rows
    chunk_relations_rows: np.ndarray  # per chunk, ascending: the relations whose evidence includes it
    entity_rank: np.ndarray  # per entity: its place by (most mentioned, id)
    entity_chunks: np.ndarray  # per entity: how many chunks mention it
    chunk_count: int
    chunk_ids: Sequence[str] | None = (
        None  # the chunk nodes' ids (derived arrays; mapped ones: `chunk_order`)
    )
    synonyms: pa.Table | None = (
        None  # derived arrays: the synonym edges, for `graph` (the walk has their keys)
    )

    @property
    def entity_count(self) -> int:
        return self.entities.num_rows

    @property
    def neighbours(self) -> sparse.csr_matrix:
        """Each node's neighbours as the rows of a CSR matrix (read `indices` and `indptr`, heaviest edge
        first): the transition's structure, since every edge is stored both ways (`walk_matrices`)."""
        return self.transition

    @classmethod
    def derive(cls, graph: GraphData, order: ChunkOrder) -> GraphArrays:
        """Everything the service reads, from the graph and the chunk table's row order."""
        ne = len(graph.entities)
        index = {e.id: i for i, e in enumerate(graph.entities)}
        community_of = {eid: c.id for c in graph.communities for eid in c.entity_ids}
        entities = pa.Table.from_pylist(
            [{**as_record(e), "community": community_of.get(e.id)} for e in graph.entities],
            schema=ENTITY_SCHEMA,
        )
        communities = pa.Table.from_pylist([as_record(c) for c in graph.communities], schema=COMMUNITY_SCHEMA)
        relations = pa.Table.from_pylist(
            [
                {
                    "id": r.id,
                    "source": r.source,
                    "target": r.target,
                    "count": r.count,
                    "chunk_ids": r.chunk_ids,
                    "pmi": r.pmi,
                    "evidence_chunk_ids": [ev["chunkId"] for ev in r.evidence],
                    "evidence_spans": [x for ev in r.evidence for x in (ev["start"], ev["end"])],
                }
                for r in graph.relations
            ],
            schema=RELATION_SCHEMA,
        )
        forms: list[str] = []
        name_entity: list[int] = []
        for i, e in enumerate(graph.entities):
            for form in name_forms(e.name, e.aliases):
                forms.append(form)
                name_entity.append(i)
        # Encoded first: the mentions' and relations' chunk ids are read back as arrays, each id looked up once.
        entities = shared_strings(entities, SHARED_STRINGS["entities"])
        relations = shared_strings(relations, SHARED_STRINGS["relations"])
        transition, keys, synonym_keys = walk_matrices(graph, index, order, entities)
        pair_order = np.argsort(keys, kind="stable")
        indptr, relation_rows = _relations_by_entity(graph, index)
        chunk_indptr, chunk_relations = _relations_by_chunk(relations, order)
        rank = np.empty(ne, dtype=np.int64)
        ranked = sorted(range(ne), key=lambda i: (-graph.entities[i].mentions, graph.entities[i].id))
        rank[np.asarray(ranked, dtype=np.int64)] = np.arange(ne)
        nr = len(graph.relations)
        return cls(
            entities,
            relations,
            shared_strings(communities, SHARED_STRINGS["communities"]),
            KeyIndex.build(c.id for c in graph.communities),
            KeyIndex.build(e.id for e in graph.entities),
            KeyIndex.build(r.id for r in graph.relations),
            KeyIndex.build(forms),
            _narrow(np.asarray(name_entity, dtype=np.int64), ne),
            _compact(transition),
            keys[pair_order],
            _narrow(pair_order, nr),
            synonym_keys,
            _narrow(indptr, 2 * nr + 1),
            _narrow(relation_rows, nr),
            keys,
            _narrow(chunk_indptr, int(chunk_indptr[-1]) + 1),
            _narrow(chunk_relations, nr),
            _narrow(rank, ne),
            _narrow(np.asarray([len(e.chunk_ids) for e in graph.entities], dtype=np.int64), len(order) + 1),
            len(order),
            order.ids_at(range(len(order))),
            pa.Table.from_pylist([as_record(x) for x in graph.synonyms], schema=SYNONYM_SCHEMA),
        )

    def save(self, folder: Path) -> None:
        """Written fresh (the folder may be a hard-linked copy of the served version's: never overwritten)."""
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        tables = (
            ("entities", self.entities),
            ("relations", self.relations),
            ("communities", self.communities),
        )
        if self.synonyms is None:
            raise ValueError("saving a graph needs its synonym edges")
        for name, table in (*tables, ("synonyms", self.synonyms)):
            with (
                pa.OSFile(str(folder / f"{name}.arrow"), "wb") as sink,
                pa.ipc.new_file(sink, table.schema) as w,
            ):
                w.write_table(table)
        for name, keys in (
            ("community", self.community_keys),
            ("entity", self.entity_keys),
            ("relation", self.relation_keys),
            ("name", self.name_keys),
        ):
            keys.save(folder / f"{name}.keys.npy")
        for part in ("data", "indices", "indptr"):
            np.save(folder / f"transition.{part}.npy", getattr(self.transition, part), allow_pickle=False)
        arrays = {
            "name_entity": self.name_entity,
            "pair_keys": self.pair_keys,
            "pair_rows": self.pair_rows,
            "synonym_keys": self.synonym_keys,
            "relations_indptr": self.relations_indptr,
            "relations_rows": self.relations_rows,
            "relation_pairs": self.relation_pairs,
            "chunk_relations.indptr": self.chunk_relations_indptr,
            "chunk_relations.rows": self.chunk_relations_rows,
            "entity_rank": self.entity_rank,
            "entity_chunks": self.entity_chunks,
        }
        for name, array in arrays.items():
            np.save(folder / f"{name}.npy", array, allow_pickle=False)
        if self.chunk_ids is None:
            raise ValueError("saving a graph needs its chunk order")
        write_id_list(folder / CHUNK_ORDER, self.chunk_ids, "chunk_id")
        meta = {"format": FORMAT, "chunks": self.chunk_count, "nodes": int(self.transition.shape[0])}
        (folder / "meta.json").write_text(json.dumps(meta), "utf-8")

    @staticmethod
    def chunk_order(folder: Path, maps: Mappings | None = None) -> IdList | None:
        """The chunk nodes' ids as saved (format 6); None for a graph that follows its table's order."""
        if not (folder / CHUNK_ORDER).is_file():
            return None
        return IdList(folder / CHUNK_ORDER, "chunk_id", maps)

    @staticmethod
    def format_of(folder: Path) -> int | None:
        try:
            return int(json.loads((folder / "meta.json").read_text("utf-8"))["format"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    @staticmethod
    def add_chunk_order(folder: Path, ids: pa.ChunkedArray) -> None:
        """Give format-5 arrays (built in the order of `ids`, their version's chunk ids) their own chunk
        order, making them format 6. The folder may be a hard-linked copy: meta.json is replaced."""
        meta_path = folder / "meta.json"
        meta = json.loads(meta_path.read_text("utf-8"))
        if meta.get("format") != 5:
            raise ValueError(f"graph arrays of format {meta.get('format')} need a rebuild, not a chunk order")
        if len(ids) != int(meta["chunks"]):
            raise ValueError(f"the graph was built for {meta['chunks']} chunks, the table holds {len(ids)}")
        write_id_list(folder / CHUNK_ORDER, ids.to_pylist(), "chunk_id")
        tmp = meta_path.with_name("meta.json.tmp")
        # 6, not the newest format: the arrays gain a chunk order and nothing else (a format-7 reader
        # would look for what they lack, the relations' PMI and evidence).
        tmp.write_text(json.dumps({**meta, "format": 6}), "utf-8")
        tmp.replace(meta_path)

    @classmethod
    def present(cls, folder: Path) -> bool:
        try:
            return json.loads((folder / "meta.json").read_text("utf-8")).get("format") in READABLE
        except (OSError, ValueError):
            return False

    @classmethod
    def open(cls, folder: Path, maps: Mappings | None = None) -> GraphArrays:
        """Map a saved graph: tables and arrays stay in the page cache, nothing is parsed but the reports.
        Through `maps` when given (the loaded version's, whose pages are released together)."""
        meta = json.loads((folder / "meta.json").read_text("utf-8"))
        maps = maps or Mappings()

        def load(name: str) -> np.ndarray:
            return maps.npy(folder / f"{name}.npy")

        def matrix(name: str) -> sparse.csr_matrix:
            n = int(meta["nodes"])
            parts = [load(f"{name}.{p}") for p in ("data", "indices", "indptr")]
            return sparse.csr_matrix((parts[0], parts[1], parts[2]), shape=(n, n), copy=False)

        return cls(
            maps.arrow(folder / "entities.arrow"),
            maps.arrow(folder / "relations.arrow"),
            maps.arrow(folder / "communities.arrow"),
            KeyIndex.load(folder / "community.keys.npy", maps),
            KeyIndex.load(folder / "entity.keys.npy", maps),
            KeyIndex.load(folder / "relation.keys.npy", maps),
            KeyIndex.load(folder / "name.keys.npy", maps),
            load("name_entity"),
            matrix("transition") if meta["format"] >= 5 else _compact(heaviest_first(matrix("transition").T)),
            load("pair_keys"),
            load("pair_rows"),
            load("synonym_keys"),
            load("relations_indptr"),
            load("relations_rows"),
            load("relation_pairs"),
            load("chunk_relations.indptr"),
            load("chunk_relations.rows"),
            load("entity_rank"),
            load("entity_chunks"),
            int(meta["chunks"]),
        )

    @staticmethod
    def graph(folder: Path) -> GraphData:
        """The graph the arrays were derived from (format 7 and later, which have no other record):
        entities, relations with their PMI and evidence, communities and synonym edges, in their order."""
        if (GraphArrays.format_of(folder) or 0) < 7:
            raise ValueError(f"graph arrays in {folder} hold no graph record (format < 7)")

        def rows(name: str) -> list[dict[str, Any]]:
            with pa.memory_map(str(folder / f"{name}.arrow")) as source:
                return pa.ipc.open_file(source).read_all().to_pylist()

        entities = []
        for e in rows("entities"):
            e.pop("community")
            entities.append(Entity(**e))
        relations = []
        for r in rows("relations"):
            spans = r.pop("evidence_spans")
            chunks = r.pop("evidence_chunk_ids")
            evidence = [
                {"chunkId": c, "start": spans[2 * i], "end": spans[2 * i + 1]} for i, c in enumerate(chunks)
            ]
            relations.append(Relation(**{**r, "pmi": round(r["pmi"], 4)}, evidence=evidence))
        return GraphData(
            entities,
            relations,
            [Community(**c) for c in rows("communities")],
            [Synonym(**x) for x in rows("synonyms")],
        )

    # -- lookups
    def entity_row(self, entity_id: str) -> int | None:
        return self.entity_keys.find(entity_id, self.entities.column("id"))

    def entity_rows(self, entity_ids: Sequence[str]) -> np.ndarray:
        """`entity_row` of each id, looked up together (-1 for an id the graph does not hold)."""
        return checked_rows(self.entity_keys, self.entities.column("id"), entity_ids)

    def entity(self, row: int) -> Entity:
        data = self.entities.slice(row, 1).to_pylist()[0]
        data.pop("community")
        return Entity(**data)

    def entity_heads(self, rows: Sequence[int] | np.ndarray) -> list[dict[str, Any]]:
        """`id`, `name`, `type` and `concept` of each entity row, in one read (a path names its steps; the
        full rows carry lists of every chunk a hub entity is in)."""
        columns = ["id", "name", "type", "concept"]
        return take_pylist(self.entities.select(columns), np.asarray(rows, dtype=np.int64))

    def community(self, row: int) -> Community:
        return Community(**self.communities.slice(row, 1).to_pylist()[0])

    def entity_head(
        self,
        row: int,
        keep: Mapping[str, Collection[str]] | None = None,
        kept: Mapping[str, np.ndarray] | None = None,
    ) -> dict[str, Any]:
        """An entity's row as a result shows it (`_row_head`)."""
        return _row_head(self.entities, row, keep, kept=kept)

    def community_head(self, row: int, keep: Mapping[str, Collection[str]] | None = None) -> dict[str, Any]:
        """A community's row as a result shows it (`_row_head`)."""
        return _row_head(self.communities, row, keep)

    def row_chunk_ids(self, table: str, row: int) -> list[str]:
        """Every chunk of a row of `table` ("entities" or "communities"), in the row's order."""
        return _row_head(self._chunk_table(table).select(["chunk_ids"]), row, head=None)["chunk_ids"]

    def chunk_codes(self, table: str, row: int) -> np.ndarray | None:
        """The chunks of a row of `table` ("entities" or "communities") as positions in
        `chunk_dictionary(table)`, in the row's order (None where the column is not one dictionary): a
        filter reads them without reading the ids as strings."""
        column = self._chunk_column(table)
        if column is None:
            return None
        values = pc.list_flatten(column.chunk(0).slice(row, 1))
        return np.asarray(values.indices.to_numpy(zero_copy_only=False))

    def chunk_dictionary(self, table: str) -> list[str] | None:
        """The chunk ids `chunk_codes(table, ...)` point into."""
        column = self._chunk_column(table)
        return None if column is None else column.chunk(0).values.dictionary.to_pylist()

    def _chunk_column(self, table: str) -> pa.ChunkedArray | None:
        column = self._chunk_table(table).column("chunk_ids")
        if column.num_chunks != 1 or not pa.types.is_dictionary(column.type.value_type):
            return None  # positions would point into one dictionary per batch
        return column

    def _chunk_table(self, table: str) -> pa.Table:
        return {"entities": self.entities, "communities": self.communities}[table]

    def community_row(self, community_id: str) -> int | None:
        return self.community_keys.find(community_id, self.communities.column("id"))

    def entity_id(self, row: int) -> str:
        return str(self.entities.column("id")[row].as_py())

    def community_of(self, row: int) -> str | None:
        value = self.entities.column("community")[row].as_py()
        return None if value is None else str(value)

    def named(self, form: str) -> list[int]:
        """Entity rows one of whose name forms is `form` (checked: a hash collision adds nothing)."""
        return self.named_many([form])[0]

    def named_many(self, forms: Sequence[str]) -> list[list[int]]:
        """`named` of each form, looked up together (a query asks for every n-gram of its words)."""
        candidates = [
            [int(self.name_entity[pos]) for pos in positions.tolist()]
            for positions in self.name_keys.rows_of_many(forms)
        ]
        every = sorted({row for rows in candidates for row in rows})
        if not every:
            return [[] for _ in forms]
        # Each candidate entity's names, read once for all the forms (one take, not a slice a hit).
        read = take_pylist(self.entities.select(["name", "aliases"]), np.asarray(every, dtype=np.int64))
        spelled = {row: name_forms(e["name"], e["aliases"] or []) for row, e in zip(every, read, strict=True)}
        return [
            [row for row in rows if form in spelled[row]]
            for form, rows in zip(forms, candidates, strict=True)
        ]

    def relation_row(self, relation_id: str) -> int | None:
        return self.relation_keys.find(relation_id, self.relations.column("id"))

    def relation_between(self, a: int, b: int) -> int | None:
        key = min(a, b) * self.entity_count + max(a, b)
        at = int(np.searchsorted(self.pair_keys, key))
        return int(self.pair_rows[at]) if at < len(self.pair_keys) and self.pair_keys[at] == key else None

    def is_synonym_edge(self, a: int, b: int) -> bool:
        key = min(a, b) * self.entity_count + max(a, b)
        at = int(np.searchsorted(self.synonym_keys, key))
        return at < len(self.synonym_keys) and int(self.synonym_keys[at]) == key

    def relations_of(self, row: int) -> np.ndarray:
        return np.asarray(self.relations_rows[self.relations_indptr[row] : self.relations_indptr[row + 1]])

    def relation_ids(self, rows: np.ndarray) -> list[str]:
        return [str(x) for x in take_pylist(self.relations.column("id"), rows)]


def _narrow(rows: np.ndarray, bound: int) -> np.ndarray:
    """int32 rows where every row below `bound` fits (half the bytes on disk and in the page cache)."""
    return rows.astype(index_type(bound))


def _relations_by_entity(graph: GraphData, index: dict[str, int]) -> tuple[np.ndarray, np.ndarray]:
    """Each entity's relations (an indptr over relation rows), most frequent first, then by id."""
    ne, nr = len(graph.entities), len(graph.relations)
    counts = np.fromiter((r.count for r in graph.relations), dtype=np.int64, count=nr)
    ids = np.array([r.id for r in graph.relations], dtype=str) if nr else np.zeros(0, dtype=str)
    ranked = np.lexsort((ids, -counts))
    ends = np.array([(index[r.source], index[r.target]) for r in graph.relations], dtype=np.int64).reshape(
        -1, 2
    )
    # Each relation in that order is listed under its source, then its target: a stable sort by entity of
    # the sequence (source, target) of each in turn.
    entity = ends[ranked].ravel()
    rows = np.repeat(ranked, 2)
    by_entity = np.argsort(entity, kind="stable")
    indptr = np.zeros(ne + 1, dtype=np.int64)
    indptr[1:] = np.cumsum(np.bincount(entity, minlength=ne))
    return indptr, rows[by_entity].astype(np.int64)


def _relations_by_chunk(relations: pa.Table, order: ChunkOrder) -> tuple[np.ndarray, np.ndarray]:
    """Chunk -> the relations it evidences (an indptr over relation rows, ascending): a result names them
    without reading every relation's chunk list (a hub pair lists thousands of chunks). `relations`: the
    relation table with its chunk ids dictionary-encoded (`shared_strings`)."""
    lengths, evidence_chunk = list_rows(relations.column("chunk_ids"), order)
    evidence_relation = np.repeat(np.arange(relations.num_rows, dtype=np.int64), lengths)
    held = evidence_chunk >= 0
    evidence_chunk, evidence_relation = evidence_chunk[held], evidence_relation[held]
    by_chunk = np.lexsort((evidence_relation, evidence_chunk))
    indptr = np.zeros(len(order) + 1, dtype=np.int64)
    indptr[1:] = np.cumsum(np.bincount(evidence_chunk, minlength=len(order)))
    return indptr, evidence_relation[by_chunk]


def _compact(matrix: sparse.csr_matrix) -> sparse.csr_matrix:
    """int32 indices where they fit (what scipy keeps without a copy when the arrays are mapped back);
    float32 weights (a walk's tolerance is 1e-4 of its restart mass: seven digits are plenty)."""
    m = sparse.csr_matrix(matrix)
    ordered = m.has_sorted_indices
    if index_type(max(m.nnz, m.shape[0])) is np.int32:
        m.indices = m.indices.astype(np.int32)
        m.indptr = m.indptr.astype(np.int32)
    m.data = m.data.astype(np.float32)
    m.has_sorted_indices = ordered  # a heaviest-first row order is kept as it is
    return m


def _row_head(
    table: pa.Table,
    row: int,
    keep: Mapping[str, Collection[str]] | None = None,
    head: int | None = LIST_HEAD,
    kept: Mapping[str, np.ndarray] | None = None,
) -> dict[str, Any]:
    """One row of `table` with each list column cut to its first `head` values (None: all of them) and its
    length as `<column>_count`; a list column named in `keep` holds only the values in that set (a result
    under a file filter shows the files that passed it), one named in `kept` only the values its boolean
    array (one per value, in order) marks. The lists stay in Arrow until they are cut: a community of a
    million-chunk corpus lists hundreds of thousands of chunks, and its row read whole into Python took
    ~0.1 s, once for the retriever and once for the result."""
    one = table.slice(row, 1)
    out: dict[str, Any] = {}
    for name, column in zip(one.column_names, one.columns, strict=True):
        if not pa.types.is_list(column.type):
            out[name] = column[0].as_py()
            continue
        values = pc.list_flatten(column)
        wanted = (keep or {}).get(name)
        if wanted is not None:
            values = values.filter(pc.is_in(values, value_set=pa.array(list(wanted), pa.string())))
        marked = (kept or {}).get(name)
        if marked is not None:
            if len(marked) != len(values):
                raise ValueError(f"{len(marked)} marks for the {len(values)} values of {name}")
            values = values.filter(pa.array(marked, pa.bool_()))
        out[f"{name}_count"] = len(values)
        out[name] = (values if head is None else values.slice(0, head)).to_pylist()
    return out
