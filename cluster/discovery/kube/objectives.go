package kube

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
)

// ObjectiveResource is the InferenceObjective resource of the Gateway API
// Inference Extension (alpha: its group and version may change, hence
// ObjectivesConfig.Resource).
var ObjectiveResource = schema.GroupVersionResource{Group: "inference.networking.x-k8s.io", Version: "v1alpha2", Resource: "inferenceobjectives"}

// ObjectivesConfig configures WatchObjectives.
type ObjectivesConfig struct {
	Dynamic   dynamic.Interface
	Namespace string
	// Resource is the objectives' resource (default ObjectiveResource).
	Resource schema.GroupVersionResource
	// Set is given the namespace's objectives after every change, as a
	// JSON List of the objects (what `kubectl get -o json` prints; the
	// caller parses and filters by pool). Called from one goroutine.
	Set    func(list []byte)
	Logger *slog.Logger
}

// WatchObjectives follows the namespace's InferenceObjectives until ctx
// ends and hands every new state to Set. It does not wait for the first
// listing: without the resource (the CRD not installed, no RBAC) the
// informer keeps retrying, logged by client-go, and Set is never called.
func WatchObjectives(ctx context.Context, cfg ObjectivesConfig) error {
	if cfg.Dynamic == nil || cfg.Set == nil || cfg.Namespace == "" {
		return errors.New("objectives: a dynamic client, a namespace and a Set are needed")
	}
	if cfg.Resource.Resource == "" {
		cfg.Resource = ObjectiveResource
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	res := cfg.Dynamic.Resource(cfg.Resource).Namespace(cfg.Namespace)
	inf := cache.NewSharedIndexInformer(listWatch(cfg.Dynamic, func(*metav1.ListOptions) {},
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return res.List(ctx, o) },
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return res.Watch(ctx, o) }),
		&unstructured.Unstructured{}, 0, cache.Indexers{})
	changed := make(chan struct{}, 1)
	poke := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { poke() }, UpdateFunc: func(any, any) { poke() }, DeleteFunc: func(any) { poke() },
	}); err != nil {
		return err
	}
	go inf.RunWithContext(ctx)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-changed:
			}
			items := []any{}
			for _, o := range inf.GetStore().List() {
				if u, ok := o.(*unstructured.Unstructured); ok {
					items = append(items, u.Object)
				}
			}
			raw, err := json.Marshal(map[string]any{"kind": "List", "items": items})
			if err != nil {
				cfg.Logger.Warn("inference objectives: encoding the listing", "err", err)
				continue
			}
			cfg.Set(raw)
		}
	}()
	return nil
}
