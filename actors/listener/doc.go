// Package listener holds the engine listener: one actor per engine publisher
// endpoint (worker, dp_rank). Its pure core, Tracker, follows the publisher's
// sequence numbers; the actor owns a ZeroMQ SUB socket (on its own goroutine)
// and, when a replay is needed, a DEALER to the engine's replay endpoint,
// feeds what they receive to the Tracker and forwards batches, in order, to
// the normalizer pool. With Config.TopicIdentity one socket carries several
// engines told apart by their topic kv@<pod>@<model> (vLLM's
// kv@<pod IP>:<port>@<model>), each pod its own stream with its own
// Tracker (topics.go, a pure table bounded by Config.MaxStreams); its
// owner adds and forgets pods at run time (AddPod, ForgetPod).
//
// README.md beside this file gives the rules: sequencing and replay, hidden
// restarts, resyncs and the exact/degraded state, recovery after a batch the
// pipeline could not apply, flow control by credits (Config.Window), reads
// and hostile peers (every socket goes through actors/zmtpguard), topics
// (the topic= prefix filter, by-topic sockets, and how their pod identity
// relates to Kubernetes discovery's), and tracing.
package listener
