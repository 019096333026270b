package kube

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

// apiServer is the pod endpoint of a Kubernetes API server as NewPodClient
// meets it, in JSON: GET /api/v1/namespaces/NS/pods lists, with watch=true
// it streams changes, and with sendInitialEvents=true (the streaming list)
// it first sends every pod as ADDED and then a BOOKMARK annotated
// k8s.io/initial-events-end. The label selector is applied server-side.
type apiServer struct {
	mu       sync.Mutex
	rv       int
	pods     map[string]*corev1.Pod
	watchers []chan metav1.WatchEvent
	requests []url.Values // the query of each request
	accept   []string     // the Accept header of each request
}

func newAPIServer(t *testing.T, pods ...*corev1.Pod) (*apiServer, string) {
	s := &apiServer{pods: map[string]*corev1.Pod{}}
	for _, p := range pods {
		s.put(t, p)
	}
	srv := httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(srv.Close)
	return s, srv.URL
}

// put creates or replaces a pod (a new resource version) and tells the
// watches.
func (s *apiServer) put(t *testing.T, p *corev1.Pod) {
	s.mu.Lock()
	defer s.mu.Unlock()
	op := watch.Added
	if _, ok := s.pods[p.Name]; ok {
		op = watch.Modified
	}
	s.rv++
	p = p.DeepCopy()
	p.ResourceVersion = strconv.Itoa(s.rv)
	s.pods[p.Name] = p
	s.tell(op, p)
}

func (s *apiServer) delete(t *testing.T, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pods[name]
	delete(s.pods, name)
	s.rv++
	p.ResourceVersion = strconv.Itoa(s.rv)
	s.tell(watch.Deleted, p)
}

// tell queues one event on every watch (with s.mu held).
func (s *apiServer) tell(op watch.EventType, p *corev1.Pod) {
	ev := event(op, p)
	for _, w := range s.watchers {
		w <- ev
	}
}

func event(op watch.EventType, p *corev1.Pod) metav1.WatchEvent {
	p = p.DeepCopy()
	p.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
	b, err := json.Marshal(p)
	if err != nil {
		panic(err) // a Pod always marshals
	}
	return metav1.WatchEvent{Type: string(op), Object: runtime.RawExtension{Raw: b}}
}

func (s *apiServer) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/api/v1/namespaces/"+ns+"/pods" {
		http.NotFound(w, r)
		return
	}
	q := r.URL.Query()
	sel, err := labels.Parse(q.Get("labelSelector"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.requests = append(s.requests, q)
	s.accept = append(s.accept, r.Header.Get("Accept"))
	var initial []metav1.WatchEvent
	list := &corev1.PodList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"},
		ListMeta: metav1.ListMeta{ResourceVersion: strconv.Itoa(s.rv)}}
	for _, p := range s.pods {
		list.Items = append(list.Items, *p)
		initial = append(initial, event(watch.Added, p))
	}
	bookmark := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{ResourceVersion: strconv.Itoa(s.rv),
		Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}}
	initial = append(initial, event(watch.Bookmark, bookmark))
	var ch chan metav1.WatchEvent
	if q.Get("watch") == "true" {
		ch = make(chan metav1.WatchEvent, 64)
		s.watchers = append(s.watchers, ch)
	}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if ch == nil {
		_ = json.NewEncoder(w).Encode(list)
		return
	}
	enc := json.NewEncoder(w)
	send := func(ev metav1.WatchEvent) {
		if ev.Type != string(watch.Bookmark) && !sel.Matches(labels.Set(podLabels(ev))) {
			return
		}
		_ = enc.Encode(ev)
		w.(http.Flusher).Flush()
	}
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
	if q.Get("sendInitialEvents") == "true" {
		for _, ev := range initial {
			send(ev)
		}
	}
	for {
		select {
		case <-r.Context().Done():
			return
		case ev := <-ch:
			send(ev)
		}
	}
}

func podLabels(ev metav1.WatchEvent) map[string]string {
	var p corev1.Pod
	_ = json.Unmarshal(ev.Object.Raw, &p)
	return p.Labels
}

// NewPodClient against the API server's protocol: the streaming list
// gives the first state, the watch every change, the selector goes to the
// server, and protobuf is asked for first.
func TestPodClientFollowsTheAPIServer(t *testing.T) {
	srv, addr := newAPIServer(t, pod("a", "10.0.0.5", true, vllm(), nil),
		pod("web", "10.0.0.9", true, map[string]string{"app": "web"}, nil))
	pods, err := NewPodClient(&rest.Config{Host: addr}, ns)
	if err != nil {
		t.Fatal(err)
	}
	reg := newRegistry()
	start(t, Config{Pods: pods, Selector: "app=vllm", Registry: reg})
	waitFor(t, reg, "llm/a/0=tcp://10.0.0.5:5557")

	srv.put(t, pod("b", "10.0.0.6", true, vllm(), nil))
	waitFor(t, reg, "llm/a/0=tcp://10.0.0.5:5557 llm/b/0=tcp://10.0.0.6:5557")
	srv.put(t, pod("a", "10.0.0.5", false, vllm(), nil)) // loses readiness
	waitFor(t, reg, "llm/b/0=tcp://10.0.0.6:5557")
	srv.delete(t, "b")
	waitFor(t, reg, "")

	srv.mu.Lock()
	defer srv.mu.Unlock()
	for i, q := range srv.requests {
		if got := q.Get("labelSelector"); got != "app=vllm" {
			t.Errorf("request %d: labelSelector %q, want app=vllm (applied by the server)", i, got)
		}
		if q.Get("watch") != "true" {
			t.Errorf("request %d is a plain list (%v): the streaming list was not used", i, q)
		}
		if !strings.HasPrefix(srv.accept[i], "application/vnd.kubernetes.protobuf") {
			t.Errorf("request %d: Accept %q, want protobuf first", i, srv.accept[i])
		}
	}
	if len(srv.requests) == 0 || srv.requests[0].Get("sendInitialEvents") != "true" {
		t.Errorf("first request %v: want a watch with sendInitialEvents=true", srv.requests)
	}
}
