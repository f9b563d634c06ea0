// Package socket is the transport between nodes where there is no RDMA:
// port channels whose peer sits on another host go through the host proxy
// over TCP (device or host memory → this proxy → socket → the peer's proxy
// → its memory), the way NCCL's socket transport works.
//
// A Conn joins two ranks of different nodes. It carries, in each
// direction, an ordered stream of requests: a put (bytes to write at an
// offset of one of the peer's registered buffers, sent in chunks of at
// most ChunkBytes so the peer writes one chunk while the next is on the
// wire) and a signal (one more token on a port channel of the peer).
// The receiving side applies requests strictly in order through a
// Handler and acknowledges each one after it is applied, so a signal is
// raised only after every byte put before it has landed, and the sender's
// flush (WaitAcked) returns only once every request issued before it has
// been applied on the far side (docs/model.md's port-channel ordering).
//
// Connections are authenticated with the job's 128-bit secret: the
// accepting rank sends a nonce and the dialing rank answers with an
// HMAC-SHA256 under a key derived from the secret and both ranks, and
// vice versa, so a process without the secret cannot inject data into a
// rank's memory, and the secret never travels. Frames are length-checked
// and decoded without trusting the peer: a malformed or truncated frame is
// an error on that connection, never a panic.
//
// The package moves bytes and tokens only: it knows nothing of plans,
// devices or executors (the communicator and the executors above it
// decide what a buffer index means), and it imports nothing from this
// module.
package socket
