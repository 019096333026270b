package mailbox

import (
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/kvrouter/kvrouter/messages/eventually"
)

func waitParked(t *testing.T, d *Dispatcher, want int64) {
	t.Helper()
	eventually.True(t, fmt.Sprint(want, " parked"), func() (bool, string) {
		return d.parked.Load() == want, fmt.Sprint("parked ", d.parked.Load())
	})
}

// runBlocked schedules n turns that block until release is called and
// returns once all n are running.
func runBlocked(d *Dispatcher, n int) (release func()) {
	rel := make(chan struct{})
	started := make(chan struct{}, n)
	for range n {
		d.Schedule(func() { started <- struct{}{}; <-rel })
	}
	for range n {
		<-started
	}
	return func() { close(rel) }
}

// A turn goes to the goroutine parked after the last one, not to a new
// goroutine: while it runs nothing is parked, and after it one is again.
func TestTurnTakesAParkedGoroutine(t *testing.T) {
	d := NewDispatcher(throughput, 4)
	ran := make(chan struct{})
	d.Schedule(func() { ran <- struct{}{} })
	<-ran
	waitParked(t, d, 1)
	release := make(chan struct{})
	parkedDuring := make(chan int64, 1)
	d.Schedule(func() { parkedDuring <- d.parked.Load(); <-release })
	if got := <-parkedDuring; got != 0 {
		t.Fatalf("%d goroutines parked during the second turn, want 0 (the parked one runs it)", got)
	}
	close(release)
	waitParked(t, d, 1)
}

// A turn that blocks holds up no other: a turn scheduled meanwhile runs on
// another goroutine; once both end, both are parked.
func TestBlockedTurnHoldsUpNoOther(t *testing.T) {
	d := NewDispatcher(throughput, 4)
	release := runBlocked(d, 1)
	ran := make(chan struct{})
	d.Schedule(func() { close(ran) })
	<-ran // would hang if the second turn waited for the first
	release()
	waitParked(t, d, 2)
}

// No more than maxParked goroutines stay parked: of three turns running at
// once with room for two, one goroutine ends; the parked two still run
// later turns.
func TestParkedAreBounded(t *testing.T) {
	before := runtime.NumGoroutine()
	d := NewDispatcher(throughput, 2)
	runBlocked(d, 3)()
	waitParked(t, d, 2)
	eventually.True(t, "the third goroutine ended", func() (bool, string) {
		n := runtime.NumGoroutine()
		return n <= before+2, fmt.Sprint(n, " goroutines, ", before, " before")
	})
	done := make(chan struct{}, 2)
	for range 2 {
		d.Schedule(func() { done <- struct{}{} })
	}
	<-done
	<-done
	waitParked(t, d, 2)
}

// Stop ends the parked goroutines; a turn scheduled after it still runs,
// on a goroutine that then ends too.
func TestStopEndsTheParked(t *testing.T) {
	before := runtime.NumGoroutine()
	d := NewDispatcher(throughput, 4)
	runBlocked(d, 2)()
	waitParked(t, d, 2)
	d.Stop()
	d.Stop() // twice is harmless
	waitParked(t, d, 0)
	ran := make(chan struct{})
	d.Schedule(func() { close(ran) })
	<-ran
	waitParked(t, d, 0)
	eventually.True(t, "every goroutine ended", func() (bool, string) {
		n := runtime.NumGoroutine()
		return n <= before, fmt.Sprint(n, " goroutines, ", before, " before")
	})
}

// Every scheduled turn runs, whether a parked goroutine takes it or a new
// one does, from many goroutines at once, and after Stop as well.
func TestEveryTurnRuns(t *testing.T) {
	d := NewDispatcher(1, 2)
	var wg sync.WaitGroup
	var mu sync.Mutex
	ran := 0
	run := func() {
		mu.Lock()
		ran++
		mu.Unlock()
		wg.Done()
	}
	for range 8 {
		wg.Add(100)
		go func() {
			for range 100 {
				d.Schedule(run)
			}
		}()
	}
	wg.Wait()
	d.Stop()
	wg.Add(10)
	for range 10 {
		d.Schedule(run)
	}
	wg.Wait()
	if ran != 810 {
		t.Errorf("%d turns ran, want 810", ran)
	}
}
