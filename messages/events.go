package messages

import "cmp"

// WorkerID identifies one engine instance (the reference API's instance_id).
type WorkerID uint64

// DpRank is an engine's data-parallel rank. Index state is kept per
// (WorkerID, DpRank).
type DpRank uint32

// WorkerKey names one event stream: a worker and one of its data-parallel
// ranks.
type WorkerKey struct {
	Worker WorkerID
	DpRank DpRank
}

// Compare orders keys by worker, then dp rank: -1, 0 or +1.
func (k WorkerKey) Compare(o WorkerKey) int {
	return cmp.Or(cmp.Compare(k.Worker, o.Worker), cmp.Compare(k.DpRank, o.DpRank))
}

// ExternalHash is an engine's own block hash, kept as the 64-bit
// two's-complement bit pattern it was sent with. It is only meaningful within
// the (worker, dp_rank) stream that sent it: the index uses it to resolve
// parent_block_hash and BlockRemoved.
type ExternalHash uint64

// LocalHash is kvrouter's own hash of one block's tokens (see package
// blockhash). Route requests hash their tokens the same way, so equal prefixes
// give equal LocalHash values across workers.
type LocalHash uint64

// StorageTier is where a block lives on its worker.
type StorageTier uint8

// Storage tiers, from the engine's `medium` field.
const (
	TierDevice   StorageTier = iota // GPU memory (medium GPU or absent)
	TierHost                        // CPU memory (CPU, CPU_PINNED)
	TierDisk                        // local or shared file storage (DISK, FS, STORAGE)
	TierExternal                    // object store or external KV service (OBJ, EXTERNAL)
)

var tierNames = [...]string{"device", "host", "disk", "external"}

// String returns the tier's lower-case name.
func (t StorageTier) String() string {
	if int(t) < len(tierNames) {
		return tierNames[t]
	}
	return "unknown"
}

// Placement says whose cache an event describes and on which tier.
type Placement struct {
	Worker WorkerKey
	Tier   StorageTier
}

// EventKind is the kind of a KvCacheEvent.
type EventKind uint8

// Event kinds.
const (
	KindStored  EventKind = iota + 1 // blocks were added
	KindRemoved                      // blocks were evicted
	KindCleared                      // every block of the stream was dropped
	// KindOffloaded: blocks already held on some tier were copied to the
	// event's tier, named only by their engine hashes (Offloaded) — an
	// engine's offload event that carries no tokens, so it cannot be hashed.
	// It carries no event id (0): it is resolved against the index, not
	// part of the RouterEvent contract other consumers follow.
	KindOffloaded

	// KindCount sizes per-kind counters.
	KindCount
)

var kindNames = [...]string{"", "stored", "removed", "cleared", "offloaded"}

// String returns the kind's lower-case name.
func (k EventKind) String() string {
	if k < KindCount && k != 0 {
		return kindNames[k]
	}
	return "unknown"
}

// StoredBlock is one block of a Stored event: the engine's hash (for parents
// and removes) and kvrouter's local hash of its tokens (for matching).
type StoredBlock struct {
	BlockHash  ExternalHash
	TokensHash LocalHash
}

// KvCacheEvent is one normalized cache change of one stream.
//
// EventID is dense per (worker, dp_rank) stream starting at 1; it is assigned
// by the coalescer, so events fresh from the normalizer carry 0.
// For KindStored, Blocks holds the chain (in order) and HasParent/ParentHash
// the engine hash it continues. For KindRemoved, Removed holds engine hashes;
// for KindOffloaded, Offloaded does. KindCleared carries no data.
type KvCacheEvent struct {
	EventID    uint64
	DpRank     DpRank
	Kind       EventKind
	HasParent  bool
	ParentHash ExternalHash
	Blocks     []StoredBlock
	Removed    []ExternalHash
	Offloaded  []ExternalHash
}

// PlacementEvent is what the normalizer emits for each accepted engine event.
// SessionID is the engine-reported session ("" when the event is
// unattributed); it is untrusted producer input and only meaningful together
// with Placement.Worker.
type PlacementEvent struct {
	Placement Placement
	Event     KvCacheEvent
	SessionID string
}

// RouterEvent is what the indexer applies and what kvrouter republishes to
// external consumers.
type RouterEvent struct {
	WorkerID    WorkerID
	Event       KvCacheEvent
	StorageTier StorageTier
	SessionID   string
}
