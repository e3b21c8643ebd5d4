"""Index builds: the local builder and the distributed (Ray) one."""
