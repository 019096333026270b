package loadgen

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// DisaggFleet is one prefill:decode pool size pair.
type DisaggFleet struct{ Prefill, Decode int }

func (f DisaggFleet) String() string { return fmt.Sprintf("%d:%d", f.Prefill, f.Decode) }

// DisaggRunConfig is the disaggregated replay's run: traces × fleets ×
// DisaggDeciders on one engine model.
type DisaggRunConfig struct {
	Traces         []string
	Fleets         []DisaggFleet
	Requests       int // per trace, 0 for all
	TokensPerBlock int
	Capacity       int // blocks per worker
	// InFlightPerWorker: a request is freed this many × (P + D) requests
	// after it arrived.
	InFlightPerWorker int
	// TransferPerBlock, seconds; 0 means DefaultTransferPerToken × block size.
	TransferPerBlock float64
	Delay            EventDelay
}

// DisaggRow is one line of the table.
type DisaggRow struct {
	Trace, Policy  string
	Fleet          DisaggFleet
	Requests       int
	SplitShare     float64 // split requests / requests
	SavedShare     float64 // saved tokens / prompt tokens
	TransferBlocks int64
	TTFTMeanMs     float64
	TTFTP99Ms      float64
}

// RunDisagg replays every trace on every fleet with every decider. The
// arrivals offer ModelOfferedLoad of the whole fleet's (P + D workers')
// prefill capacity (ArrivalGap), bursts keeping their own gaps.
func RunDisagg(cfg DisaggRunConfig) ([]DisaggRow, error) {
	transfer := cfg.TransferPerBlock
	if transfer == 0 {
		transfer = DefaultTransferPerToken * float64(cfg.TokensPerBlock)
	}
	var rows []DisaggRow
	for _, path := range cfg.Traces {
		reqs, err := LoadTrace(path, TraceOptions{TokensPerBlock: cfg.TokensPerBlock, Limit: cfg.Requests})
		if err != nil {
			return nil, err
		}
		for _, f := range cfg.Fleets {
			n := f.Prefill + f.Decode
			gap := ArrivalGap(reqs, n)
			dc := DisaggConfig{Prefill: f.Prefill, Decode: f.Decode, BlockSize: cfg.TokensPerBlock, Capacity: cfg.Capacity,
				InFlight: cfg.InFlightPerWorker * n, Gap: gap, Arrivals: ArrivalTimes(reqs, gap),
				TransferPerBlock: transfer, Delay: cfg.Delay}
			for _, d := range DisaggDeciders() {
				t, err := ReplayDisagg(reqs, d, dc)
				if err != nil {
					return nil, err
				}
				row := DisaggRow{Trace: TraceLabel(path), Policy: d.Name(), Fleet: f, Requests: t.Requests, TransferBlocks: t.TransferBlocks}
				if t.Requests > 0 {
					row.SplitShare = float64(t.Split) / float64(t.Requests)
				}
				if t.PromptTokens > 0 {
					row.SavedShare = float64(t.SavedTokens) / float64(t.PromptTokens)
				}
				row.TTFTMeanMs, row.TTFTP99Ms = ttftMs(t.TTFT)
				rows = append(rows, row)
			}
		}
	}
	return rows, nil
}

// WriteDisaggTable prints rows as an aligned table.
func WriteDisaggTable(w io.Writer, rows []DisaggRow) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "trace\tP:D\tpolicy\trequests\tsplit\tprefill saved\tblocks moved\tTTFT est mean ms\tTTFT est p99 ms\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%.1f%%\t%.1f%%\t%d\t%.1f\t%.1f\t\n", r.Trace, r.Fleet, r.Policy, r.Requests,
			100*r.SplitShare, 100*r.SavedShare, r.TransferBlocks, r.TTFTMeanMs, r.TTFTP99Ms)
	}
	return tw.Flush()
}
