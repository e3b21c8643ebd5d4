"""The write path (`POST /v1/documents`, `DELETE /v1/documents/{id}`): the durable task queue (`tasks`) and
the one writer that applies queued tasks to the index (`writer`), built for a service by `writer_for`."""
