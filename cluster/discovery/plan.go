package discovery

import (
	"cmp"
	"slices"

	"github.com/kvrouter/kvrouter/messages"
)

// Op is what an action does.
type Op string

// Actions, in the order Plan returns them.
const (
	// OpUnregister removes a stream no Ready pod calls for (its blocks
	// leave the index).
	OpUnregister Op = "unregister"
	// OpReregister replaces a stream whose pod changed (a new IP, model,
	// block size, port): unregister the old, register the new.
	OpReregister Op = "reregister"
	// OpRegister adds a stream of a pod that became Ready.
	OpRegister Op = "register"
)

// Action is one change to the registry: Reg is the registration to write
// (register, re-register) or the one to remove (unregister).
type Action struct {
	Op  Op
	Reg Registration
}

// Plan compares the desired registrations with the registered ones and
// returns the actions that make them equal: unregisters first (so a model
// that moves to another block size frees its namespace before it comes
// back), then re-registers, then registers, each sorted by key. Only
// registrations in the discovery range (Discovered) are considered
// registered by discovery: hand-made ones are never touched. A desired
// registration whose key someone registered by hand cannot happen (the
// ranges are apart).
func Plan(desired, registered []Registration) []Action {
	want := make(map[messages.WorkerKey]Registration, len(desired))
	for _, r := range desired {
		want[r.Key] = r
	}
	have := make(map[messages.WorkerKey]Registration, len(registered))
	var out []Action
	for _, r := range registered {
		if !Discovered(r.Key.Worker) {
			continue
		}
		have[r.Key] = r
		w, ok := want[r.Key]
		switch {
		case !ok:
			out = append(out, Action{Op: OpUnregister, Reg: r})
		case !Same(w, r):
			out = append(out, Action{Op: OpReregister, Reg: w})
		}
	}
	for _, r := range desired {
		if _, ok := have[r.Key]; !ok {
			out = append(out, Action{Op: OpRegister, Reg: r})
		}
	}
	rank := map[Op]int{OpUnregister: 0, OpReregister: 1, OpRegister: 2}
	slices.SortFunc(out, func(a, b Action) int {
		return cmp.Or(cmp.Compare(rank[a.Op], rank[b.Op]), a.Reg.Key.Compare(b.Reg.Key))
	})
	return out
}

// Same reports whether two registrations of a key register the same
// stream (Pod, a label for logs, is not compared).
func Same(a, b Registration) bool {
	a.Pod, b.Pod = "", ""
	return a == b
}

// Mine keeps the actions this host writes: those of workers owns says are
// its own. In a cluster owns is the registry's owner of the worker's rank
// 0, so every rank of a pod is written by one host; on one host it is nil
// and every action is kept.
func Mine(actions []Action, owns func(messages.WorkerID) bool) []Action {
	if owns == nil {
		return actions
	}
	return slices.DeleteFunc(slices.Clone(actions), func(a Action) bool { return !owns(a.Reg.Key.Worker) })
}
