package gatewayproxy

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// StatusPort is the port of the proxy's readiness endpoint (GET /ready: 200 once the Table is served).
// A Gateway listener cannot use it.
const StatusPort = 15021

// Options are what Run needs.
type Options struct {
	// Client reads the ConfigMap (the pod's service account may get, list and watch that one).
	Client kubernetes.Interface
	// Namespace and ConfigMap name the ConfigMap holding the Table under ConfigMapKey.
	Namespace, ConfigMap string
	// BindIPs are the addresses every port listens on.
	BindIPs []string
	// Logger receives what the proxy has to say; nil is the standard logger.
	Logger *log.Logger
}

// Run serves the Table of the ConfigMap, following its changes, and a readiness endpoint on StatusPort
// of each bind address, until ctx ends.
func Run(ctx context.Context, o Options) error {
	if o.Logger == nil {
		o.Logger = log.Default()
	}
	p := &Proxy{BindIPs: o.BindIPs, Logger: o.Logger}
	defer p.Close()

	status := http.NewServeMux()
	status.HandleFunc("/ready", func(w http.ResponseWriter, _ *http.Request) {
		if !p.Ready() {
			http.Error(w, "no routing table served yet", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	for _, ip := range o.BindIPs {
		l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(StatusPort)))
		if err != nil {
			return fmt.Errorf("status port: %w", err)
		}
		s := &http.Server{Handler: status, ReadHeaderTimeout: 10 * time.Second, ErrorLog: o.Logger}
		go func() { _ = s.Serve(l) }()
		defer s.Close()
	}

	apply := func(obj any) {
		cm, ok := obj.(*corev1.ConfigMap)
		if !ok {
			return
		}
		t, err := Parse([]byte(cm.Data[ConfigMapKey]))
		if err == nil {
			err = p.Update(t)
		}
		if err != nil {
			o.Logger.Printf("configmap %s/%s (resourceVersion %s): %v", cm.Namespace, cm.Name, cm.ResourceVersion, err)
			return
		}
		o.Logger.Printf("serving configmap %s/%s at resourceVersion %s: %d ports", cm.Namespace, cm.Name, cm.ResourceVersion, len(t.Ports))
	}
	lw := cache.NewListWatchFromClient(o.Client.CoreV1().RESTClient(), "configmaps", o.Namespace, fields.OneTermEqualSelector("metadata.name", o.ConfigMap))
	inf := cache.NewSharedIndexInformer(lw, &corev1.ConfigMap{}, 0, cache.Indexers{})
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    apply,
		UpdateFunc: func(_, obj any) { apply(obj) },
	}); err != nil {
		return err
	}
	inf.Run(ctx.Done())
	if err := ctx.Err(); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}
