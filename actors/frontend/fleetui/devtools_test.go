//go:build browser

package fleetui_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// devtools is a minimal Chrome DevTools protocol client over
// --remote-debugging-pipe: the browser reads NUL-terminated JSON commands
// on its fd 3 and writes answers and events on its fd 4. One page target,
// attached in flat mode, receives every command sent with send; the events
// the test cares about (console errors, uncaught exceptions, browser log
// errors, the load event) are collected as they arrive.
//
// Why not a library: the one in the module index (chromedp) reworked its
// API in every recent release; this test needs six commands.
type devtools struct {
	t       *testing.T
	cmd     *exec.Cmd
	w       io.WriteCloser
	session string

	mu       sync.Mutex
	next     int
	pending  map[int]chan message
	problems []string
	loaded   chan struct{}
	loadOnce sync.Once
	done     chan struct{}
}

type message struct {
	ID        int             `json:"id"`
	Method    string          `json:"method"`
	SessionID string          `json:"sessionId"`
	Params    json.RawMessage `json:"params"`
	Result    json.RawMessage `json:"result"`
	Error     *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// startBrowser runs Debian's Chromium headless, as root (--no-sandbox),
// with a fresh profile and nothing that reaches the network by itself.
func startBrowser(t *testing.T) *devtools {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("chromium not found (Debian: apt-get install chromium; .ci/run installs it): %v", err)
	}
	cmdR, cmdW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(path, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-extensions",
		"--disable-default-apps", "--disable-dev-shm-usage", "--mute-audio", "--hide-scrollbars",
		"--user-data-dir="+t.TempDir(), "--window-size=1400,1000", "--remote-debugging-pipe", "about:blank")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	cmd.ExtraFiles = []*os.File{cmdR, outW} // fd 3, fd 4
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	cmdR.Close()
	outW.Close()
	d := &devtools{t: t, cmd: cmd, w: cmdW, pending: map[int]chan message{}, loaded: make(chan struct{}), done: make(chan struct{})}
	go d.read(outR)
	t.Cleanup(func() {
		_, _ = d.sendTo("", "Browser.close", nil)
		d.w.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(30 * time.Second): // a bound on a hung browser, not a wait for a condition
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("chromium stderr (last 4 KiB):\n%s", tail(stderr.String(), 4096))
		}
	})
	var target struct {
		TargetID string `json:"targetId"`
	}
	d.call("", "Target.createTarget", map[string]any{"url": "about:blank"}, &target)
	var attached struct {
		SessionID string `json:"sessionId"`
	}
	d.call("", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &attached)
	d.session = attached.SessionID
	for _, domain := range []string{"Runtime", "Log", "Page"} {
		d.call(d.session, domain+".enable", nil, nil)
	}
	return d
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func (d *devtools) read(r io.Reader) {
	defer close(d.done)
	br := bufio.NewReader(r)
	for {
		b, err := br.ReadBytes(0)
		if err != nil {
			d.mu.Lock()
			for id, ch := range d.pending {
				close(ch)
				delete(d.pending, id)
			}
			d.mu.Unlock()
			return
		}
		var m message
		if err := json.Unmarshal(b[:len(b)-1], &m); err != nil {
			d.problem("devtools: undecodable message: " + err.Error())
			continue
		}
		if m.ID != 0 {
			d.mu.Lock()
			ch := d.pending[m.ID]
			delete(d.pending, m.ID)
			d.mu.Unlock()
			if ch != nil {
				ch <- m
			}
			continue
		}
		d.event(m)
	}
}

func (d *devtools) problem(p string) {
	d.mu.Lock()
	d.problems = append(d.problems, p)
	d.mu.Unlock()
}

// event keeps what the page must not have: console errors, uncaught
// exceptions and error log entries (a failed request, a CSP violation).
func (d *devtools) event(m message) {
	switch m.Method {
	case "Runtime.consoleAPICalled":
		var p struct {
			Type string `json:"type"`
			Args []struct {
				Value       any    `json:"value"`
				Description string `json:"description"`
			} `json:"args"`
		}
		_ = json.Unmarshal(m.Params, &p)
		if p.Type == "error" || p.Type == "assert" {
			d.problem(fmt.Sprintf("console.%s: %v", p.Type, p.Args))
		}
	case "Runtime.exceptionThrown":
		d.problem("uncaught exception: " + string(m.Params))
	case "Log.entryAdded":
		var p struct {
			Entry struct {
				Level, Source, Text, URL string
			} `json:"entry"`
		}
		_ = json.Unmarshal(m.Params, &p)
		if p.Entry.Level == "error" {
			d.problem(fmt.Sprintf("log (%s): %s %s", p.Entry.Source, p.Entry.Text, p.Entry.URL))
		}
	case "Page.loadEventFired":
		d.loadOnce.Do(func() { close(d.loaded) })
	}
}

func (d *devtools) sendTo(session, method string, params any) (message, error) {
	d.mu.Lock()
	d.next++
	id := d.next
	ch := make(chan message, 1)
	d.pending[id] = ch
	d.mu.Unlock()
	msg := map[string]any{"id": id, "method": method}
	if params != nil {
		msg["params"] = params
	}
	if session != "" {
		msg["sessionId"] = session
	}
	b, _ := json.Marshal(msg)
	if _, err := d.w.Write(append(b, 0)); err != nil {
		return message{}, err
	}
	m, ok := <-ch
	if !ok {
		return message{}, fmt.Errorf("%s: the browser closed the pipe", method)
	}
	if m.Error != nil {
		return m, fmt.Errorf("%s: %d %s", method, m.Error.Code, m.Error.Message)
	}
	return m, nil
}

// call sends a command and decodes its result into out (if not nil).
func (d *devtools) call(session, method string, params, out any) {
	d.t.Helper()
	m, err := d.sendTo(session, method, params)
	if err != nil {
		d.t.Fatal(err)
	}
	if out != nil {
		if err := json.Unmarshal(m.Result, out); err != nil {
			d.t.Fatalf("%s: %v: %s", method, err, m.Result)
		}
	}
}

// navigate loads url in the page and waits for its load event.
func (d *devtools) navigate(url string) {
	d.t.Helper()
	d.call(d.session, "Page.navigate", map[string]any{"url": url}, nil)
	select {
	case <-d.loaded:
	case <-d.done:
		d.t.Fatal("the browser exited before the page loaded")
	}
}

// eval evaluates a JavaScript expression in the page (awaiting it when it
// is a promise) and decodes its value into out.
func (d *devtools) eval(expr string, out any) {
	d.t.Helper()
	var res struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		ExceptionDetails json.RawMessage `json:"exceptionDetails"`
	}
	d.call(d.session, "Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true, "awaitPromise": true}, &res)
	if res.ExceptionDetails != nil {
		d.t.Fatalf("evaluating %q: %s", expr, res.ExceptionDetails)
	}
	if out != nil {
		if err := json.Unmarshal(res.Result.Value, out); err != nil {
			d.t.Fatalf("evaluating %q: %v: %s", expr, err, res.Result.Value)
		}
	}
}

// screenshot returns a PNG of the whole page.
func (d *devtools) screenshot() []byte {
	d.t.Helper()
	var lm struct {
		Content struct{ Width, Height float64 } `json:"cssContentSize"`
	}
	d.call(d.session, "Page.getLayoutMetrics", nil, &lm)
	var shot struct {
		Data []byte `json:"data"` // base64 in JSON
	}
	d.call(d.session, "Page.captureScreenshot", map[string]any{"format": "png", "captureBeyondViewport": true,
		"clip": map[string]any{"x": 0, "y": 0, "width": lm.Content.Width, "height": lm.Content.Height, "scale": 1}}, &shot)
	return shot.Data
}

func (d *devtools) seen() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.problems...)
}
