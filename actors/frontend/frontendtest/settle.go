package frontendtest

import (
	"context"
	"fmt"
	"testing"

	"github.com/kvrouter/kvrouter/bench/simengine"
	"github.com/kvrouter/kvrouter/messages/api"
)

// Workers is the part of the service Settle reads.
type Workers interface {
	Workers(context.Context) ([]api.WorkerInfo, error)
}

// Settle waits until every engine's stream is followed up to its last
// batch; engines[i] is worker i+1 (heartbeats give the listeners a seq to
// catch: a batch published before a listener subscribed is otherwise
// missed until the next one).
func Settle(tb testing.TB, svc Workers, engines []*simengine.Engine) {
	tb.Helper()
	WaitFor(tb, "streams caught up", func() (bool, any) {
		ws, err := svc.Workers(context.Background())
		if err != nil || len(ws) != len(engines) {
			return false, fmt.Sprint(ws, err)
		}
		for i, w := range ws {
			r := w.Ranks[0]
			if r.State != api.StateExact || r.LastSeq == nil || *r.LastSeq+1 != engines[i].Stats().NextSeq {
				_ = engines[i].Publish()
				return false, fmt.Sprintf("worker %d: %+v", w.InstanceID, r)
			}
		}
		return true, ""
	})
}
