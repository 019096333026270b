// Package fleetui is kvrouter's built-in fleet page (GET /ui): one HTML
// page rendered by the server with the workers of the moment, and a small
// script that keeps it live by polling the router's own JSON endpoints:
// /workers, /loads (booked load) and /decisions (the latest routing
// decisions, and totals over all of them that two polls turn into the
// route rate and the predicted hit rate, from every front end).
//
// Everything is embedded in the binary and inlined into the page: no
// build step, no file beside the binary, nothing loaded from elsewhere.
// The page's Content-Security-Policy (CSP) enforces that: it allows only
// the inlined script and style, by their hashes, and requests to the
// page's own origin.
//
// It stays usable with thousands of ranks: the worker table is sorted
// (click a column), filtered (text and state) and paged (Rows per page);
// the server renders the first page, the script every later one.
//
// Why not a single-page app or a Grafana-only view: an app needs a build
// and a place to serve it from, and Grafana needs Prometheus; an operator
// with only port-forward to the router still gets the answers (is every
// index exact, is routing paying off, is anything loaded).
package fleetui

import (
	"cmp"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"html/template"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kvrouter/kvrouter/messages/api"
)

var (
	//go:embed page.html
	pageHTML string
	//go:embed page.js
	pageJS string
	//go:embed page.css
	pageCSS string
)

var page = template.Must(template.New("ui").Parse(pageHTML))

// Rows is the worker rows per page (the script's PAGE).
const Rows = 50

// CSP is the page's Content-Security-Policy header.
var CSP = "default-src 'none'; script-src '" + hash(pageJS) + "'; style-src '" + hash(pageCSS) +
	"'; connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

func hash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha256-" + base64.StdEncoding.EncodeToString(sum[:])
}

// Page is what one rendering shows.
type Page struct {
	Workers []api.WorkerInfo
	Now     time.Time
	// Poll is the script's refresh interval (default 2 s).
	Poll time.Duration
}

type row struct {
	Worker, Rank, Model, Tenant, State, Blocks, Seq, Lag, Endpoint, Warnings string
}

type counts struct{ Ranks, Exact, Recovering, Degraded int }

// Render writes the page.
func Render(w io.Writer, p Page) error {
	if p.Poll <= 0 {
		p.Poll = 2 * time.Second
	}
	type rank struct {
		w uint64
		r api.RankInfo
	}
	var all []rank
	var c counts
	for _, wi := range p.Workers {
		for _, r := range wi.Ranks {
			all = append(all, rank{uint64(wi.InstanceID), r})
			c.Ranks++
			switch r.State {
			case api.StateExact:
				c.Exact++
			case api.StateRecovering:
				c.Recovering++
			case api.StateDegraded:
				c.Degraded++
			}
		}
	}
	slices.SortFunc(all, func(a, b rank) int { return cmp.Or(cmp.Compare(a.w, b.w), cmp.Compare(a.r.DpRank, b.r.DpRank)) })
	var rows []row
	for _, x := range all[:min(len(all), Rows)] {
		seq, lag := "none", "no event yet"
		if x.r.LastSeq != nil {
			seq, lag = strconv.FormatUint(*x.r.LastSeq, 10), strconv.FormatFloat(x.r.LagSeconds, 'f', 0, 64)+" s ago"
		}
		rows = append(rows, row{Worker: strconv.FormatUint(uint64(x.w), 10), Rank: strconv.FormatUint(uint64(x.r.DpRank), 10),
			Model: x.r.ModelName, Tenant: x.r.TenantID, State: string(x.r.State), Blocks: strconv.FormatUint(x.r.Blocks, 10),
			Seq: seq, Lag: lag, Endpoint: x.r.Endpoint, Warnings: strings.Join(x.r.Warnings, "; ")})
	}
	return page.Execute(w, struct {
		Now        string
		PollSecs   float64
		PollMillis int64
		Counts     counts
		Rows       []row
		Style      template.CSS
		Script     template.JS
	}{p.Now.UTC().Format(time.RFC3339), p.Poll.Seconds(), p.Poll.Milliseconds(), c, rows, template.CSS(pageCSS), template.JS(pageJS)})
}
