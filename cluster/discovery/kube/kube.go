package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/kvrouter/kvrouter/cluster/discovery"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/tracectx"
	"go.opentelemetry.io/otel/attribute"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
)

// PoolResource is the InferencePool resource of the Gateway API Inference
// Extension.
var PoolResource = schema.GroupVersionResource{Group: "inference.networking.k8s.io", Version: "v1", Resource: "inferencepools"}

// DefaultResync is the period of the full pass when Config.Resync is 0.
const DefaultResync = 10 * time.Second

// Registry is what discovery needs of the router: the registrations it
// holds and the two writes. In a cluster it is the replicated registry, so
// Registered shows what every host wrote.
type Registry interface {
	// Registered lists the registered streams (any; Plan keeps
	// discovery's own).
	Registered() []discovery.Registration
	// Register adds one stream.
	Register(discovery.Registration) error
	// Unregister removes one stream (its blocks leave the index).
	Unregister(discovery.Registration) error
}

// Config configures Start.
type Config struct {
	// Pods lists and watches Namespace's pods (NewPodClient).
	Pods PodClient
	// Dynamic reads the InferencePool; needed when Pool is set.
	Dynamic dynamic.Interface
	// Namespace watched (pods, and the pool).
	Namespace string
	// Selector is a label selector on the pods ("" every pod, then Pool
	// must be set).
	Selector string
	// Pool is the InferencePool's name in Namespace ("" none).
	Pool string
	// Core holds the defaults for what a pod does not say.
	Core discovery.Config
	// Registry is the router's.
	Registry Registry
	// Owns says whether this host writes a worker's registrations (nil:
	// one host writes everything).
	Owns func(messages.WorkerID) bool
	// Resync is the period of the full pass (default DefaultResync).
	Resync time.Duration
	Logger *slog.Logger
}

// Discovery runs the informers and the reconcile loop.
type Discovery struct {
	cfg     Config
	pods    cache.Store // Namespace's pods that match Selector
	pool    cache.Store // the pool (nil without one)
	kick    chan struct{}
	cancel  context.CancelFunc
	done    chan struct{}
	metrics *metrics
	tracer  tracectx.Tracer

	mu      sync.Mutex // guards skipped, last (read by tests and logs)
	skipped map[string]discovery.Reason
	last    Pass
}

// Pass is what one reconcile did.
type Pass struct {
	Streams int                  // streams the Ready pods call for
	Applied map[discovery.Op]int // actions that succeeded
	Failed  map[discovery.Op]int // actions the registry refused
	Skipped []discovery.Skip     // pods left out
}

// Start starts the informers, waits until their caches have synced (or
// ctx ends: an error), runs a first pass and keeps reconciling until Stop.
func Start(ctx context.Context, cfg Config) (*Discovery, error) {
	switch {
	case cfg.Pods == nil || cfg.Registry == nil:
		return nil, errors.New("discovery: a pod client and a registry are needed")
	case cfg.Selector == "" && cfg.Pool == "":
		return nil, errors.New("discovery: give a label selector, an InferencePool, or both (every pod of the namespace is never meant)")
	case cfg.Pool != "" && cfg.Dynamic == nil:
		return nil, errors.New("discovery: an InferencePool needs a dynamic client")
	}
	if _, err := labels.Parse(cfg.Selector); err != nil {
		return nil, fmt.Errorf("discovery: selector %q: %w", cfg.Selector, err)
	}
	if cfg.Resync <= 0 {
		cfg.Resync = DefaultResync
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	run, cancel := context.WithCancel(context.Background())
	d := &Discovery{cfg: cfg, kick: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{}),
		metrics: newMetrics(), tracer: tracectx.NewTracer("github.com/kvrouter/kvrouter/cluster/discovery/kube"),
		skipped: map[string]discovery.Reason{}}
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { d.poke() },
		UpdateFunc: func(any, any) { d.poke() },
		DeleteFunc: func(any) { d.poke() },
	}
	pods := cfg.Pods
	podInformer := cache.NewSharedIndexInformer(listWatch(pods, func(o *metav1.ListOptions) { o.LabelSelector = cfg.Selector },
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return pods.List(ctx, o) },
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return pods.Watch(ctx, o) }),
		&corev1.Pod{}, 0, cache.Indexers{})
	informers := []cache.SharedIndexInformer{podInformer}
	d.pods = podInformer.GetStore()
	if cfg.Pool != "" {
		pools := cfg.Dynamic.Resource(PoolResource).Namespace(cfg.Namespace)
		poolInformer := cache.NewSharedIndexInformer(listWatch(cfg.Dynamic, func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", cfg.Pool).String()
		},
			func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return pools.List(ctx, o) },
			func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return pools.Watch(ctx, o) }),
			&unstructured.Unstructured{}, 0, cache.Indexers{})
		informers = append(informers, poolInformer)
		d.pool = poolInformer.GetStore()
	}
	var synced []cache.InformerSynced
	for _, inf := range informers {
		if _, err := inf.AddEventHandler(handler); err != nil {
			cancel()
			return nil, err
		}
		synced = append(synced, inf.HasSynced)
		go inf.RunWithContext(run)
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		cancel()
		return nil, fmt.Errorf("discovery: the pod or pool cache did not sync: %w", context.Cause(ctx))
	}
	d.reconcile()
	go d.loop(run)
	return d, nil
}

// Stop ends the informers and the loop.
func (d *Discovery) Stop() {
	d.cancel()
	<-d.done
}

// Last is what the last pass did.
func (d *Discovery) Last() Pass {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.last
}

func (d *Discovery) poke() {
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

func (d *Discovery) loop(ctx context.Context) {
	defer close(d.done)
	t := time.NewTicker(d.cfg.Resync)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.kick:
		case <-t.C:
		}
		d.reconcile()
	}
}

// reconcile runs one pass: the caches → desired → plan → this host's
// actions, applied in order. A refused action is counted, logged and
// tried again at the next pass.
func (d *Discovery) reconcile() {
	pool, ok := d.readPool()
	if !ok {
		return
	}
	var in []discovery.Pod
	for _, obj := range d.pods.List() {
		if p, ok := obj.(*corev1.Pod); ok { // the informer stores nothing else
			in = append(in, podOf(p))
		}
	}
	want, skips := discovery.Desired(d.cfg.Core, in, pool)
	actions := discovery.Mine(discovery.Plan(want, d.cfg.Registry.Registered()), d.cfg.Owns)
	pass := Pass{Streams: len(want), Applied: map[discovery.Op]int{}, Failed: map[discovery.Op]int{}, Skipped: skips}
	var span tracectx.Span
	if len(actions) > 0 {
		span = d.tracer.Root("discovery.reconcile")
	}
	for _, a := range actions {
		if err := d.apply(a); err != nil {
			pass.Failed[a.Op]++
			d.metrics.action(a.Op, "error")
			d.cfg.Logger.Warn("discovery: registry refused an action", "op", a.Op, "pod", a.Reg.Pod,
				"worker", a.Reg.Key.Worker, "dp_rank", a.Reg.Key.DpRank, "error", err)
			continue
		}
		pass.Applied[a.Op]++
		d.metrics.action(a.Op, "ok")
		d.cfg.Logger.Info("discovery: "+string(a.Op), "pod", a.Reg.Pod, "worker", a.Reg.Key.Worker,
			"dp_rank", a.Reg.Key.DpRank, "endpoint", a.Reg.Endpoint, "model", a.Reg.Model)
	}
	if span.Recording() {
		span.SetAttributes(attribute.Int("discovery.streams", len(want)),
			attribute.Int("discovery.registered", pass.Applied[discovery.OpRegister]),
			attribute.Int("discovery.reregistered", pass.Applied[discovery.OpReregister]),
			attribute.Int("discovery.unregistered", pass.Applied[discovery.OpUnregister]),
			attribute.Int("discovery.failed", len(actions)-pass.Applied[discovery.OpRegister]-pass.Applied[discovery.OpReregister]-pass.Applied[discovery.OpUnregister]))
	}
	span.End()
	d.metrics.pass(len(want))
	d.mu.Lock()
	defer d.mu.Unlock()
	d.noteSkips(skips)
	d.last = pass
}

// apply writes one action; a re-register is an unregister and a register.
func (d *Discovery) apply(a discovery.Action) error {
	r := d.cfg.Registry
	switch a.Op {
	case discovery.OpRegister:
		return r.Register(a.Reg)
	case discovery.OpUnregister:
		return r.Unregister(a.Reg)
	default:
		if err := r.Unregister(a.Reg); err != nil {
			return err
		}
		return r.Register(a.Reg)
	}
}

// noteSkips counts and logs each pod that starts being skipped (or is
// skipped for a new reason); one that is fine again is forgotten. Called
// with d.mu held.
func (d *Discovery) noteSkips(skips []discovery.Skip) {
	now := make(map[string]discovery.Reason, len(skips))
	for _, s := range skips {
		now[s.Pod] = s.Reason
		if d.skipped[s.Pod] != s.Reason {
			d.metrics.skip(s.Reason)
			d.cfg.Logger.Warn("discovery: pod not registered", "pod", s.Pod, "reason", s.Reason, "detail", s.Detail)
		}
	}
	d.skipped = now
}

// readPool is the pool from the cache: nil without one, an empty pool
// (selecting nothing) when it does not exist or cannot be read; false when
// the cache failed (the pass is skipped).
func (d *Discovery) readPool() (*discovery.Pool, bool) {
	if d.pool == nil {
		return nil, true
	}
	obj, exists, err := d.pool.GetByKey(d.cfg.Namespace + "/" + d.cfg.Pool)
	if err == nil && !exists {
		return &discovery.Pool{}, true
	}
	if err != nil {
		d.cfg.Logger.Warn("discovery: reading the InferencePool from the cache", "pool", d.cfg.Pool, "error", err)
		return nil, false
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		d.metrics.poolError()
		return &discovery.Pool{}, true
	}
	pool, err := poolOf(u)
	if err != nil {
		d.metrics.poolError()
		d.cfg.Logger.Warn("discovery: InferencePool not usable (no pod selected)", "pool", d.cfg.Pool, "error", err)
	}
	return pool, true
}

// poolOf reads an InferencePool's selector and target ports.
func poolOf(u *unstructured.Unstructured) (*discovery.Pool, error) {
	sel, _, err := unstructured.NestedStringMap(u.Object, "spec", "selector", "matchLabels")
	if err != nil {
		return &discovery.Pool{}, fmt.Errorf("spec.selector.matchLabels: %w", err)
	}
	ports, _, err := unstructured.NestedSlice(u.Object, "spec", "targetPorts")
	if err != nil {
		return &discovery.Pool{}, fmt.Errorf("spec.targetPorts: %w", err)
	}
	pool := &discovery.Pool{Selector: sel}
	for i, p := range ports {
		m, ok := p.(map[string]any)
		n, found, err := unstructured.NestedInt64(m, "number")
		if !ok || !found || err != nil || n < 1 || n > 65535 {
			return &discovery.Pool{}, fmt.Errorf("spec.targetPorts[%d]: want a number in [1, 65535]", i)
		}
		pool.TargetPorts = append(pool.TargetPorts, int32(n))
	}
	return pool, nil
}

// podOf is what discovery reads of a pod.
func podOf(p *corev1.Pod) discovery.Pod {
	out := discovery.Pod{Namespace: p.Namespace, Name: p.Name, IP: p.Status.PodIP,
		Deleting: p.DeletionTimestamp != nil, Labels: p.Labels, Annotations: p.Annotations}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			out.Ready = c.Status == corev1.ConditionTrue
		}
	}
	for _, c := range p.Spec.Containers {
		for _, port := range c.Ports {
			out.Ports = append(out.Ports, discovery.Port{Name: port.Name, Number: port.ContainerPort})
		}
	}
	return out
}
