// Package zmtpguard holds the transports kvrouter's ZeroMQ sockets dial
// and bind through: zmq4's own tcp and ipc transports, registered again as
// kvrouter+tcp and kvrouter+ipc (Endpoint maps an endpoint onto them),
// whose connections read through a buffer and a frame-size guard.
//
// # Why a guard
//
// zmq4 (upstream github.com/go-zeromq/zmq4, which has no ZMQ_MAXMSGSIZE
// and no hook for one) reads a frame's header and then allocates the body
// at the size the header declares, up to 2^63 bytes, before reading it. A
// peer that reaches one of kvrouter's sockets — an engine endpoint the
// listener dials, the listener's bound socket in llm-d mode, the replay
// endpoint, a consumer of the router-event publisher — could declare a
// frame of a terabyte and kill the process ("fatal error: runtime: out of
// memory", which no recover catches), or make it hold gigabytes per
// connection.
//
// The guard (guard.go) is a pure state machine over the bytes a
// connection hands zmq4, in the order zmq4 reads them: the fixed 64-byte
// ZMTP 3.x greeting, then each frame's flags byte and size (1 byte, or 8
// bytes big-endian when the LONG flag is set), commands and messages
// alike; bodies are skipped with one comparison per read, without
// copying. It sums the declared sizes of a message's frames (MORE flag)
// and, on the read that completes a header taking the message over
// MaxMessageSize, closes the connection and fails that read with
// ErrMessageTooLarge, so zmq4 never sees the size and never allocates.
// zmq4 reports the error as a broken connection: the listener counts it
// as a socket error (the dropped-messages metric's socket_error reason),
// recreates its socket after a backoff and the Tracker repairs the gap by
// replay, as for any lost connection. The guard logs every refusal (local
// and remote address, what was declared); one during the handshake of a
// bound socket's connection is only logged (zmq4 drops a connection that
// fails its handshake without telling the socket's owner), and so is one
// on the publisher's PUB, which has no receive path to count it on.
// BenchmarkRead measures the guard's cost against the buffered read alone.
//
// # Why buffered
//
// zmq4 reads each frame's header and body with separate calls on the
// connection: a 3-frame KV-event message cost 6 to 9 read system calls,
// about a fifth of the ingest path's CPU. A 16 KiB read buffer makes that
// one system call per buffer at most.
//
// # What is and is not guarded
//
// Every socket that uses Endpoint: the listener's SUB (dialing or bound,
// tcp:// or ipc://), its replay DEALER, and the router-event publisher's
// bound PUB. inproc:// endpoints pass unchanged — no peer outside the
// process can reach them. Endpoint refuses any other transport (udp://),
// so no kvrouter socket is left unguarded. The simulated engines and the
// chaos harness (bench/) use plain zmq4 endpoints: they are test peers on
// loopback, not a service. What the cap leaves open: up to MaxMessageSize
// per message being read per connection, and zmq4's receive queue of whole
// messages (10 per socket, plus one waiting per connection).
package zmtpguard
