package requestpath

import "github.com/kvrouter/kvrouter/messages"

// State is one request's booking as its response unfolds: a plain value,
// no I/O. Each method takes one observation of the response and returns
// the single bookkeeping Action it calls for (often none). Whatever order
// and however often the observations come, a request gets at most one
// Rebook per serving rank change, at most one PrefillDone, at most one
// MovePrefill (before PrefillDone) and exactly one Free — the last one to
// ask for it, after which every observation is ignored.
type State struct {
	// Booked is the rank the request's load is booked on.
	Booked       messages.WorkerKey
	served       bool
	prefilled    bool
	prefillMoved bool
	freed        bool
}

// NewState is the booking of a request the router booked on booked.
func NewState(booked messages.WorkerKey) State { return State{Booked: booked} }

// ActionKind is the bookkeeping call an observation asks for.
type ActionKind uint8

const (
	// None: nothing to call.
	None ActionKind = iota
	// Rebook: move the booking to Action.To (the rank that served).
	Rebook
	// PrefillDone: the first response byte came: prefill is over.
	PrefillDone
	// Free: the response ended (done, error, reset, cancelled).
	Free
	// MovePrefill: move a split request's prefill booking to Action.To
	// (the alternate its prefill leg is retried on).
	MovePrefill
)

// String is the action's metric label.
func (k ActionKind) String() string {
	return [...]string{"none", "rebook", "prefill_done", "free", "move_prefill"}[k]
}

// Action is what an observation asks the caller to do.
type Action struct {
	Kind ActionKind
	To   messages.WorkerKey // for Rebook and MovePrefill
	// Ignored: the observation came out of turn (after the booking was
	// freed, a second Served) and changed nothing; Kind is then the call
	// it would have made (the metric's label), not one to make.
	Ignored bool
}

// Served: the request was sent to (and accepted by) rank k — the first
// choice, or the next-best after a retry. Only the first Served counts.
func (s *State) Served(k messages.WorkerKey) Action {
	if s.freed || s.served {
		return Action{Kind: Rebook, Ignored: true}
	}
	s.served = true
	if k == s.Booked {
		return Action{}
	}
	s.Booked = k
	return Action{Kind: Rebook, To: k}
}

// FirstByte: the first response body byte came back. It implies Served on
// the booked rank when no Served came first (a data plane that does not
// report the endpoint it used).
func (s *State) FirstByte() Action {
	if s.freed {
		return Action{Kind: PrefillDone, Ignored: true}
	}
	s.served = true
	if s.prefilled {
		return Action{}
	}
	s.prefilled = true
	return Action{Kind: PrefillDone}
}

// MovePrefill: a split request's prefill leg failed before any response
// byte and is retried on prefill worker to. Only the first counts, and
// only before FirstByte (prefill done frees the prefill booking).
func (s *State) MovePrefill(to messages.WorkerKey) Action {
	if s.freed || s.prefilled || s.prefillMoved {
		return Action{Kind: MovePrefill, Ignored: true}
	}
	s.prefillMoved = true
	return Action{Kind: MovePrefill, To: to}
}

// Done: the response is over — complete, failed, reset or cancelled
// (before or after any byte).
func (s *State) Done() Action {
	if s.freed {
		return Action{Kind: Free, Ignored: true}
	}
	s.freed = true
	return Action{Kind: Free}
}

// Freed reports whether Done has been observed.
func (s *State) Freed() bool { return s.freed }
