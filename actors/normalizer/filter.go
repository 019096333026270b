package normalizer

import (
	"strings"

	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/wire"
)

// kindClass is what kvrouter makes of a kv_cache_spec_kind.
type kindClass uint8

const (
	kindUnknown kindClass = iota
	kindMain              // indexed: full attention and its variants
	kindNonMain           // never indexed: its blocks do not form prefix chains
)

// classifyKind maps a kv_cache_spec_kind to its class.
func classifyKind(kind string) kindClass {
	switch kind {
	case "full_attention", "mla_attention", "sink_full_attention":
		return kindMain
	case "sliding_window", "sliding_window_mla", "mamba", "chunked_local_attention",
		"encoder_only_attention", "cross_attention":
		return kindNonMain
	}
	return kindUnknown
}

// groupFilter decides whether an event belongs to the main attention group
// (README.md, "Rules" 3; Dynamo's order): an explicit kind decides; else the kind
// learned for (dp_rank, group_idx) from earlier BlockStored events; else
// group 0 (or no group at all) is main.
func (r *rankState) groupFilter(ev *wire.Event) messages.Reason {
	if ev.Kind != "" {
		class := classifyKind(ev.Kind)
		if ev.Type == wire.TypeStored && ev.GroupIdx.Ok && class != kindUnknown {
			if _, known := r.groups[ev.GroupIdx.V]; known || len(r.groups) < maxLearnedGroups {
				r.groups[ev.GroupIdx.V] = class
			}
		}
		switch class {
		case kindMain:
			return messages.ReasonNone
		case kindNonMain:
			return messages.ReasonNonMainAttentionKind
		}
		return messages.ReasonUnknownKind
	}
	if !ev.GroupIdx.Ok {
		return messages.ReasonNone
	}
	switch r.groups[ev.GroupIdx.V] {
	case kindMain:
		return messages.ReasonNone
	case kindNonMain:
		return messages.ReasonNonMainAttentionGroup
	}
	if ev.GroupIdx.V == 0 {
		return messages.ReasonNone
	}
	return messages.ReasonUnlearnedGroupIdx
}

// placementTier maps medium to a storage tier (case-insensitive; "" is the
// device).
func placementTier(medium string) (messages.StorageTier, bool) {
	for _, m := range media {
		if strings.EqualFold(medium, m.name) {
			return m.tier, true
		}
	}
	return 0, false
}

var media = [...]struct {
	name string
	tier messages.StorageTier
}{
	{"", messages.TierDevice},
	{"GPU", messages.TierDevice},
	{"CPU", messages.TierHost},
	{"CPU_PINNED", messages.TierHost},
	{"DISK", messages.TierDisk},
	{"FS", messages.TierDisk},
	{"STORAGE", messages.TierDisk},
	{"OBJ", messages.TierExternal},
	{"EXTERNAL", messages.TierExternal},
}

// localityReason accepts events about this worker's own cache.
func localityReason(locality string) messages.Reason {
	switch locality {
	case "", "LOCAL":
		return messages.ReasonNone
	case "REMOTE":
		return messages.ReasonRemoteLocality
	}
	return messages.ReasonUnknownLocality
}
