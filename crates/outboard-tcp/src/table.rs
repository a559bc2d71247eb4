//! The TCP layer of one shard: connections by 4-tuple, listeners, accept queues.
//! STUB: being written.
