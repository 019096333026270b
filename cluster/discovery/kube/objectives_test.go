package kube

import (
	"context"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/kvrouter/kvrouter/messages/eventually"
)

func objective(name string, priority int64) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "inference.networking.x-k8s.io/v1alpha2", "kind": "InferenceObjective",
		"metadata": map[string]any{"namespace": ns, "name": name},
		"spec":     map[string]any{"priority": priority, "poolRef": map[string]any{"name": "pool"}},
	}}
}

// The namespace's objectives are handed over as a List after each
// change: created, updated, deleted.
func TestWatchObjectives(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{ObjectiveResource: "InferenceObjectiveList"}, objective("chat", 10))
	var mu sync.Mutex
	last := ""
	if err := WatchObjectives(ctx, ObjectivesConfig{Dynamic: dyn, Namespace: ns, Set: func(raw []byte) {
		mu.Lock()
		defer mu.Unlock()
		last = string(raw)
	}}); err != nil {
		t.Fatal(err)
	}
	seen := func(what string, ok func(string) bool) {
		t.Helper()
		eventually.True(t, what, func() (bool, string) {
			mu.Lock()
			defer mu.Unlock()
			return ok(last), last
		})
	}
	seen("the first listing", func(s string) bool {
		return strings.HasPrefix(s, `{"items":[`) && strings.Contains(s, `"name":"chat"`) && strings.Contains(s, `"priority":10`) && strings.Contains(s, `"kind":"List"`)
	})
	res := dyn.Resource(ObjectiveResource).Namespace(ns)
	if _, err := res.Update(ctx, objective("chat", 3), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	seen("the update", func(s string) bool { return strings.Contains(s, `"priority":3`) })
	if err := res.Delete(ctx, "chat", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	seen("the deletion", func(s string) bool { return s == `{"items":[],"kind":"List"}` })
	if err := WatchObjectives(ctx, ObjectivesConfig{Namespace: ns}); err == nil {
		t.Fatal("no client: no error")
	}
}
