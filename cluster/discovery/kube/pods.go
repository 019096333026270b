package kube

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// PodClient lists and watches the pods of one namespace: what the
// reflector behind the pod cache calls. NewPodClient is the production
// one; client-go's typed PodInterface (and its fake) has the same two
// methods.
type PodClient interface {
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.PodList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// NewPodClient is a REST client of namespace's pods (GET
// /api/v1/namespaces/NS/pods, the list and the watch), with a scheme that
// knows core/v1 only: not client-go's clientset, whose scheme and typed
// clients compile every Kubernetes API group (doc.go). It asks for
// protobuf and takes JSON, as the clientset did.
func NewPodClient(rc *rest.Config, namespace string) (PodClient, error) {
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("kubernetes client: core/v1 scheme: %w", err)
	}
	cfg := rest.CopyConfig(rc)
	cfg.APIPath = "/api"
	cfg.GroupVersion = &corev1.SchemeGroupVersion
	cfg.NegotiatedSerializer = serializer.NewCodecFactory(scheme).WithoutConversion()
	if cfg.ContentType == "" {
		cfg.ContentType = runtime.ContentTypeProtobuf
		cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	client, err := rest.RESTClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return &restPods{client: client, namespace: namespace, params: runtime.NewParameterCodec(scheme)}, nil
}

// restPods is NewPodClient's client.
type restPods struct {
	client    rest.Interface
	namespace string
	params    runtime.ParameterCodec
}

func (p *restPods) request(opts *metav1.ListOptions) *rest.Request {
	r := p.client.Get().Namespace(p.namespace).Resource("pods").VersionedParams(opts, p.params)
	if opts.TimeoutSeconds != nil {
		r = r.Timeout(time.Duration(*opts.TimeoutSeconds) * time.Second)
	}
	return r
}

// List is one GET of the pods (opts: the selector, the resource version).
func (p *restPods) List(ctx context.Context, opts metav1.ListOptions) (*corev1.PodList, error) {
	out := &corev1.PodList{}
	if err := p.request(&opts).Do(ctx).Into(out); err != nil {
		return nil, err
	}
	return out, nil
}

// Watch is a GET with watch=true: the stream of the pods' changes.
func (p *restPods) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return p.request(&opts).Watch(ctx)
}

// listWatch is what an informer runs: list and watch, their options
// narrowed by tweak (the selector). The reflector streams the initial list
// in the watch (sendInitialEvents) unless client says it cannot, which
// client-go's fakes do — the rule client-go's generated informers follow.
func listWatch(client any, tweak func(*metav1.ListOptions),
	list cache.ListWithContextFunc, watchFn cache.WatchFuncWithContext) cache.ListerWatcher {
	return cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			tweak(&o)
			return list(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			tweak(&o)
			return watchFn(ctx, o)
		},
	}, client)
}
