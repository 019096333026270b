package enginesignals

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Signals is what one engine rank said about itself in one exposition.
// A field the engine does not report is left zero and its Has flag unset.
type Signals struct {
	// Engine is the family whose names the exposition used (vllm, sglang,
	// trtllm).
	Engine string
	// Waiting and Running are the requests queued and in the running
	// batch.
	Waiting, Running float64
	HasLoad          bool
	// KVUsage is the share of the KV cache in use by requests, in [0, 1];
	// KVUsageName the metric it came from (vLLM renamed its gauge).
	KVUsage     float64
	KVUsageName string
	HasKV       bool
	// BlockSize and TotalBlocks are the engine's KV block size in tokens
	// and the blocks of its cache (0: not reported).
	BlockSize, TotalBlocks int64
	// PrefixQueries and PrefixHits are the engine's cumulative
	// prefix-cache counters, in tokens (HasPrefix: reported).
	PrefixQueries, PrefixHits float64
	HasPrefix                 bool
	// Lora is vLLM's adapter state (nil: not reported).
	Lora *Lora
}

// Lora is the newest sample of vLLM's vllm:lora_requests_info gauge: the
// adapters with running and waiting requests, and how many adapters the
// engine holds at once.
type Lora struct {
	Running, Waiting []string
	Max              int
	// Truncated: the engine listed more than MaxAdapters adapters; the
	// first MaxAdapters of each list are kept.
	Truncated bool
}

// Bounds on what one exposition may make the extractor keep.
const (
	// MaxAdapters caps the adapter names kept per list.
	MaxAdapters = 256
	// MaxAdapterName caps one adapter name, in bytes (longer: bad value).
	MaxAdapterName = 256
	// maxRequests bounds a request gauge: more is not an engine's value.
	maxRequests = 1e9
	// maxBlocks bounds a block size or block count label.
	maxBlocks = 1 << 40
)

// Reason says why a scrape gave no signals: the closed set of the
// failure counters' labels.
type Reason string

// The reasons.
const (
	ReasonUnreachable Reason = "unreachable" // connection refused, reset, DNS, TLS
	ReasonTimeout     Reason = "timeout"     // no whole answer within Config.Timeout
	ReasonStatus      Reason = "http_status" // an answer other than 200
	ReasonTooLarge    Reason = "too_large"   // a body over Config.MaxBytes
	ReasonParse       Reason = "parse"       // not the Prometheus text format
	ReasonNoSignals   Reason = "no_signals"  // none of the engine's names, or none for the rank
	ReasonBadValue    Reason = "bad_value"   // a value no engine reports (negative, NaN, usage over 1)
)

// Reasons lists every Reason, in a stable order.
var Reasons = [...]Reason{ReasonUnreachable, ReasonTimeout, ReasonStatus, ReasonTooLarge, ReasonParse, ReasonNoSignals, ReasonBadValue}

// Error is a failed scrape or extraction, with its Reason.
type Error struct {
	Reason Reason
	Err    error
}

func (e *Error) Error() string { return string(e.Reason) + ": " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

func fail(r Reason, format string, args ...any) *Error {
	return &Error{Reason: r, Err: fmt.Errorf(format, args...)}
}

// ReasonOf is err's Reason (ReasonParse for an error of another kind).
func ReasonOf(err error) Reason {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ReasonParse
}

// Extractor turns an exposition into Signals. It keeps a buffer between
// calls: one per goroutine.
type Extractor struct {
	buf []byte
}

// Extract reads the signals of data-parallel rank rank from an exposition
// in the Prometheus text format, with the names of engine (VLLM, SGLang,
// TRTLLM, or Auto: the first family whose load names appear). Only the
// lines of the names it reads are parsed: the engines' many histograms are
// skipped by a byte scan before the text parser sees anything.
func (x *Extractor) Extract(body []byte, engine string, rank int) (Signals, error) {
	x.buf = filter(x.buf[:0], body)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(x.buf))
	if err != nil {
		return Signals{}, &Error{Reason: ReasonParse, Err: err}
	}
	var tried []family
	if f := familyOf(engine); f != nil {
		tried = []family{*f}
	} else {
		tried = families
	}
	for _, f := range tried {
		if s, ok, err := f.extract(fams, rank); ok || err != nil {
			return s, err
		}
	}
	if engine == Auto || engine == "" {
		return Signals{}, fail(ReasonNoSignals, "no request queue, running or KV-usage metric of vLLM, SGLang or TensorRT-LLM for rank %d", rank)
	}
	return Signals{}, fail(ReasonNoSignals, "no %s request queue, running or KV-usage metric for rank %d", engine, rank)
}

// extract reads f's signals; ok is false when none of its load names is
// present (another engine's exposition).
func (f *family) extract(fams map[string]*dto.MetricFamily, rank int) (Signals, bool, error) {
	s := Signals{Engine: f.engine}
	w, okW := f.gauge(fams, f.waiting, rank)
	r, okR := f.gauge(fams, f.running, rank)
	kv, kvName, okKV := f.gaugeNamed(fams, f.kvUsage, rank)
	if !okW && !okR && !okKV {
		return s, false, nil
	}
	if okW || okR {
		for _, v := range []float64{w, r} {
			if !(v >= 0 && v <= maxRequests) {
				return s, true, fail(ReasonBadValue, "%s request gauge %v", f.engine, v)
			}
		}
		s.Waiting, s.Running, s.HasLoad = w, r, true
	}
	if okKV {
		if !(kv >= 0 && kv <= 1.001) {
			return s, true, fail(ReasonBadValue, "%s %s = %v, want a share in [0, 1]", f.engine, kvName, kv)
		}
		s.KVUsage, s.KVUsageName, s.HasKV = min(kv, 1), kvName, true
	}
	var err error
	if s.BlockSize, s.TotalBlocks, err = f.cache(fams, rank); err != nil {
		return s, true, err
	}
	q, okQ := f.gauge(fams, f.prefixQueries, rank)
	h, okH := f.gauge(fams, f.prefixHits, rank)
	if okQ && okH && q >= 0 && h >= 0 && !math.IsInf(q, 0) && !math.IsInf(h, 0) {
		s.PrefixQueries, s.PrefixHits, s.HasPrefix = q, h, true
	}
	if s.Lora, err = f.loraInfo(fams, rank); err != nil {
		return s, true, err
	}
	return s, true, nil
}

func (f *family) gauge(fams map[string]*dto.MetricFamily, cands []sample, rank int) (float64, bool) {
	v, _, ok := f.gaugeNamed(fams, cands, rank)
	return v, ok
}

// gaugeNamed is the value of the first of cands present for rank (the
// largest, when several samples are left: tensor-parallel ranks report the
// same gauge), and its name.
func (f *family) gaugeNamed(fams map[string]*dto.MetricFamily, cands []sample, rank int) (float64, string, bool) {
	for _, c := range cands {
		ms := f.samples(fams, c, rank)
		if len(ms) == 0 {
			continue
		}
		v := math.Inf(-1)
		for _, m := range ms {
			v = max(v, value(m))
		}
		return v, c.Name, true
	}
	return 0, "", false
}

// samples are c's samples of rank: those whose rank label is the rank;
// when none is, and every sample carries the same rank (an endpoint
// serving one engine whose index is not the registration's rank), all of
// them; none when they are of several other ranks.
func (f *family) samples(fams map[string]*dto.MetricFamily, c sample, rank int) []*dto.Metric {
	mf := fams[c.Name]
	if mf == nil {
		return nil
	}
	var sel []*dto.Metric
	for _, m := range mf.GetMetric() {
		if c.Label == "" || label(m, c.Label) == c.Value {
			sel = append(sel, m)
		}
	}
	if f.rankLabel == "" || len(sel) == 0 {
		return sel
	}
	want := strconv.Itoa(rank)
	var mine []*dto.Metric
	ranks := map[string]bool{}
	for _, m := range sel {
		r, has := labelOK(m, f.rankLabel)
		if !has || r == want {
			mine = append(mine, m)
		}
		ranks[r] = true
	}
	if len(mine) == 0 && len(ranks) == 1 {
		return sel
	}
	return mine
}

// cache reads the block size and total blocks (0 when not reported).
func (f *family) cache(fams map[string]*dto.MetricFamily, rank int) (bs, total int64, err error) {
	for _, c := range f.cacheInfo {
		ms := f.samples(fams, c, rank)
		if len(ms) == 0 {
			continue
		}
		if bs, err = intLabel(ms[0], f.blockSizeLabel); err != nil {
			return 0, 0, err
		}
		if total, err = intLabel(ms[0], f.numBlocksLabel); err != nil {
			return 0, 0, err
		}
		return bs, total, nil
	}
	for _, p := range []struct {
		dst   *int64
		cands []sample
	}{{&bs, f.blockSize}, {&total, f.numBlocks}} {
		if v, ok := f.gauge(fams, p.cands, rank); ok {
			if !(v >= 0 && v <= maxBlocks) {
				return 0, 0, fail(ReasonBadValue, "%s cache size %v", f.engine, v)
			}
			*p.dst = int64(v)
		}
	}
	return bs, total, nil
}

func intLabel(m *dto.Metric, name string) (int64, error) {
	v, ok := labelOK(m, name)
	if !ok || v == "" || v == "None" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || n > maxBlocks {
		return 0, fail(ReasonBadValue, "label %s=%q, want a block count", name, v)
	}
	return n, nil
}

// loraInfo reads vLLM's LoRA gauge: its value is the time the engine set
// it, so the newest sample is the current state.
func (f *family) loraInfo(fams map[string]*dto.MetricFamily, rank int) (*Lora, error) {
	for _, c := range f.lora {
		ms := f.samples(fams, c, rank)
		if len(ms) == 0 {
			continue
		}
		newest := ms[0]
		for _, m := range ms[1:] {
			if value(m) > value(newest) {
				newest = m
			}
		}
		l := &Lora{}
		var err error
		if l.Max, err = maxLora(newest); err != nil {
			return nil, err
		}
		for _, p := range []struct {
			dst  *[]string
			name string
		}{{&l.Running, "running_lora_adapters"}, {&l.Waiting, "waiting_lora_adapters"}} {
			if err := l.adapters(p.dst, label(newest, p.name)); err != nil {
				return nil, err
			}
		}
		return l, nil
	}
	return nil, nil
}

func maxLora(m *dto.Metric) (int, error) {
	v := label(m, "max_lora")
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > 1<<20 {
		return 0, fail(ReasonBadValue, "label max_lora=%q, want a count", v)
	}
	return n, nil
}

// adapters splits a comma-separated adapter list into dst, at most
// MaxAdapters names.
func (l *Lora) adapters(dst *[]string, list string) error {
	for name := range strings.SplitSeq(list, ",") {
		if name = strings.TrimSpace(name); name == "" {
			continue
		}
		if len(name) > MaxAdapterName {
			return fail(ReasonBadValue, "a LoRA adapter name of %d bytes (at most %d)", len(name), MaxAdapterName)
		}
		if len(*dst) == MaxAdapters {
			l.Truncated = true
			return nil
		}
		*dst = append(*dst, name)
	}
	return nil
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Untyped != nil:
		return m.Untyped.GetValue()
	}
	return math.NaN()
}

func label(m *dto.Metric, name string) string {
	v, _ := labelOK(m, name)
	return v
}

func labelOK(m *dto.Metric, name string) (string, bool) {
	for _, lp := range m.GetLabel() {
		if lp.GetName() == name {
			return lp.GetValue(), true
		}
	}
	return "", false
}

// filter appends to dst the lines of body the extractor reads: the samples
// of wanted names. Comment lines (HELP, TYPE) and every other metric are
// dropped without parsing; the samples are read as untyped, so an
// exposition that repeats a TYPE line (several processes' output
// concatenated) still parses.
func filter(dst, body []byte) []byte {
	for len(body) > 0 {
		line := body
		if i := bytes.IndexByte(body, '\n'); i >= 0 {
			line, body = body[:i+1], body[i+1:]
		} else {
			body = nil
		}
		if keep(line) {
			dst = append(dst, line...)
			if line[len(line)-1] != '\n' {
				dst = append(dst, '\n')
			}
		}
	}
	return dst
}

func keep(l []byte) bool {
	for len(l) > 0 && (l[0] == ' ' || l[0] == '\t') {
		l = l[1:]
	}
	if len(l) == 0 || l[0] == '#' {
		return false
	}
	// Most sample lines have labels: the name ends at the first '{' (a
	// vectorised search), or at a blank before it; a name of a length no
	// wanted name has is dropped without hashing it.
	end := bytes.IndexByte(l, '{')
	if end < 0 {
		end = len(l)
	}
	for i, c := range l[:end] {
		if c <= ' ' {
			end = i
			break
		}
	}
	if end >= len(wantedLen) || !wantedLen[end] {
		return false
	}
	return wanted[string(l[:end])]
}
