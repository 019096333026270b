package predicted

import "github.com/kvrouter/kvrouter/messages"

// What the index's applied events do to the predictions.

// Apply follows one event the index applied: a BlockStored of a predicted
// block confirms it (its engine hash is kept, so a later BlockRemoved finds
// it), a BlockRemoved kills the confirmed predictions it names, a clear
// kills every prediction of the stream. Event-less workers publish no
// events; one that does is treated the same way.
func (t *Table) Apply(ev messages.RouterEvent) {
	if t.pairs.Len() == 0 {
		return
	}
	k := messages.WorkerKey{Worker: ev.WorkerID, DpRank: ev.Event.DpRank}
	switch ev.Event.Kind {
	case messages.KindStored:
		for _, b := range ev.Event.Blocks {
			i, ok := t.lookup(b.TokensHash, k)
			if !ok {
				continue
			}
			w := t.workerOf(k)
			e := &t.entries[i]
			if e.confirmed {
				delete(w.ext, e.ext)
			} else {
				t.stats.Confirmed++
			}
			e.ext, e.confirmed, e.waiting = b.BlockHash, true, 0
			w.ext[b.BlockHash] = i
		}
	case messages.KindRemoved:
		w := t.workers[k]
		if w == nil || len(w.ext) == 0 {
			return
		}
		for _, h := range ev.Event.Removed {
			if i, ok := w.ext[h]; ok {
				t.stats.Killed++
				t.remove(i)
			}
		}
	case messages.KindCleared:
		t.Clear(k)
	}
}

// Clear kills every prediction of k (the stream was cleared).
func (t *Table) Clear(k messages.WorkerKey) {
	if w := t.workers[k]; w != nil {
		t.clearKey(k, w)
		return
	}
	t.killWhere(func(e *entry) bool { return e.key == k }, true)
}

// clearKey kills k's predictions: its own list for an event-less worker,
// else its entries on the shared list.
func (t *Table) clearKey(k messages.WorkerKey, w *worker) {
	if w.list == none {
		t.killWhere(func(e *entry) bool { return e.key == k }, true)
		return
	}
	for t.lists[w.list].tail != none {
		t.stats.Killed++
		t.remove(t.lists[w.list].tail)
	}
}

// killWhere removes the shared list's entries that match.
func (t *Table) killWhere(match func(*entry) bool, count bool) {
	for i := t.lists[0].head; i != none; {
		next := t.entries[i].next
		if match(&t.entries[i]) {
			if count {
				t.stats.Killed++
			}
			t.remove(i)
		}
		i = next
	}
}

// workerOf returns k's state, creating it (event-publishing) if needed.
func (t *Table) workerOf(k messages.WorkerKey) *worker {
	w := t.workers[k]
	if w == nil {
		w = &worker{list: none}
		t.workers[k] = w
	}
	if w.ext == nil {
		w.ext = map[messages.ExternalHash]int32{}
	}
	return w
}
