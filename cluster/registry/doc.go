// Package registry is the cluster's worker registry: every member keeps a
// full copy of every (worker, dp_rank) registration, replicated by
// messages between the members' replicas (RegistryPut on every change,
// RegistrySync to catch up: a joining or restarted member, and every
// member periodically), each entry versioned so that copies converge
// whatever order messages arrive in. Owner picks, from the current
// members, the one host that follows (listens to) each stream.
//
//	Table   pure: versioned entries, merge, tombstones (table.go)
//	Owner   pure: rendezvous hashing of a stream over the members (owner.go)
//	Replica one member's copy: the actor other members' replicas talk to,
//	        broadcasts, anti-entropy, change notifications (replica.go)
//
// See cluster/README.md ("One registry for the whole cluster", "Each stream
// followed by one host") for the choice and its failure cases.
package registry
