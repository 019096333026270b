package pipeline

import "github.com/kvrouter/kvrouter/messages"

// loadChunk is the most events Load puts in one RouterEventBatch.
const loadChunk = 512

// Load sends dumped events (a peer's dump: whole streams, each stream's
// events in order) to the index as a live stream's batches would arrive:
// through the index's front, so they are applied — and followed by the
// session index — before anything a listener started later delivers. The
// loaded streams carry no position until their first live batch.
func (p *Pipeline) Load(events []messages.RouterEvent) {
	for len(events) > 0 {
		w, n := events[0].WorkerID, 1
		for n < len(events) && n < loadChunk && events[n].WorkerID == w {
			n++
		}
		p.system.Root.Send(p.index.PID(), &messages.RouterEventBatch{Events: events[:n:n]})
		events = events[n:]
	}
}
