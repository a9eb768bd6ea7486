package apiserver

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apiextensionsinformers "k8s.io/apiextensions-apiserver/pkg/client/informers/externalversions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	clientretry "k8s.io/client-go/util/retry"

	"github.com/rayctl/rayctl/configs"
	"github.com/rayctl/rayctl/pkg/apiserver/etcd"
	"github.com/rayctl/rayctl/pkg/apiserver/pki"
)

// startServer runs etcd and the API server with crds installed until the test ends, and returns its
// loopback config once it is ready.
func startServer(t *testing.T, crds [][]byte) *rest.Config {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	creds, err := etcd.IssueCredentials(filepath.Join(dir, "pki", "etcd"), filepath.Join(dir, "pki"))
	if err != nil {
		t.Fatal(err)
	}
	store, err := etcd.Start(ctx, creds.ServerConfig(etcd.Config{Dir: filepath.Join(dir, "etcd")}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(store.Close)
	ca, err := pki.LoadOrCreate(filepath.Join(dir, "pki"))
	if err != nil {
		t.Fatal(err)
	}
	serving, err := ca.Serving("apiserver", []string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	loopback, err := ca.Client("apiserver-loopback", "system:apiserver", []string{"system:masters"})
	if err != nil {
		t.Fatal(err)
	}
	saKey, err := ca.SigningKey("sa")
	if err != nil {
		t.Fatal(err)
	}
	server, err := New(Config{CA: ca, Serving: serving, Loopback: loopback, ServiceAccountKey: saKey,
		EtcdEndpoint: store.Endpoint, EtcdClient: creds.APIServerClient, EtcdCAFile: creds.CA.CertFile(), CRDs: func() ([][]byte, error) { return crds, nil }})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- server.Run(runCtx) }()
	t.Cleanup(func() {
		stop()
		<-done
		server.Close()
	})
	ready := make(chan error, 1)
	go func() { ready <- WaitReady(ctx, server.LoopbackConfig) }()
	select {
	case err = <-ready:
	case err = <-done:
	}
	if err != nil {
		t.Fatalf("API server not ready: %v", err)
	}
	return server.LoopbackConfig
}

// widgetCRD is a CRD manifest of group example.com, named plural.example.com, of kind kind, giving
// neither a singular nor a list kind.
func widgetCRD(plural, kind string) []byte {
	return []byte(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: ` + plural + `.example.com
spec:
  group: example.com
  names: {plural: ` + plural + `, kind: ` + kind + `}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object}}
`)
}

// TestCRDNamesAtStart checks what start-up leaves on the CRDs it creates: the names accepted (the
// server's defaults for those the manifest leaves out), Established, and a condition another of
// apiextensions' controllers sets at creation (the API approval of the Gateway API's *.k8s.io CRDs)
// kept; then that a CRD created with a name already in use is left to apiextensions' naming controller,
// which reports the conflict, and that accepting a CRD another controller has written since keeps what
// that controller wrote.
func TestCRDNamesAtStart(t *testing.T) {
	gateway, err := configs.CRDManifests(configs.GatewayGroup)
	if err != nil {
		t.Fatal(err)
	}
	cfg := startServer(t, append(gateway, widgetCRD("widgets", "Widget")))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client := apiextensionsclient.NewForConfigOrDie(cfg)
	crds := client.ApiextensionsV1().CustomResourceDefinitions()
	list, err := crds.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	gatewayCRDs := 0
	for i := range list.Items {
		crd := &list.Items[i]
		if !established(crd) || !apihelpers.IsCRDConditionTrue(crd, apiextensionsv1.NamesAccepted) {
			t.Errorf("CRD %s not Established with its names accepted: %+v", crd.Name, crd.Status.Conditions)
		}
		if crd.Spec.Group == configs.GatewayGroup {
			gatewayCRDs++
			if !apihelpers.IsCRDConditionTrue(crd, apiextensionsv1.KubernetesAPIApprovalPolicyConformant) {
				t.Errorf("CRD %s lost its %s condition: %+v", crd.Name, apiextensionsv1.KubernetesAPIApprovalPolicyConformant, crd.Status.Conditions)
			}
		}
		if crd.Name == "widgets.example.com" {
			want := apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"}
			if got := crd.Status.AcceptedNames; got.Plural != want.Plural || got.Singular != want.Singular || got.Kind != want.Kind || got.ListKind != want.ListKind {
				t.Errorf("widgets accepted names %+v, want %+v", got, want)
			}
		}
	}
	if gatewayCRDs == 0 {
		t.Fatal("no Gateway API CRD installed")
	}

	factory := apiextensionsinformers.NewSharedInformerFactory(client, 0)
	informer := factory.Apiextensions().V1().CustomResourceDefinitions().Informer()
	informerCtx, stopInformer := context.WithCancel(ctx)
	factory.Start(informerCtx.Done())
	defer factory.Shutdown()
	defer stopInformer()
	view := informerCRDs{informer}
	acceptor := newNameAcceptor(view)
	rc := client.ApiextensionsV1().RESTClient()

	// Kind Widget is widgets.example.com's: gadgets.example.com must not be accepted with it.
	name, _, err := installCRD(ctx, rc, view, widgetCRD("gadgets", "Widget"), false, acceptor)
	if err != nil {
		t.Fatal(err)
	}
	err = view.waitFor(ctx, map[string]bool{name: true}, func(crd *apiextensionsv1.CustomResourceDefinition) bool {
		c := apihelpers.FindCRDCondition(crd, apiextensionsv1.NamesAccepted)
		return c != nil && c.Status == apiextensionsv1.ConditionFalse
	})
	if err != nil {
		t.Fatalf("CRD %s never had NamesAccepted False: %v", name, err)
	}
	gadgets, err := crds.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c := apihelpers.FindCRDCondition(gadgets, apiextensionsv1.NamesAccepted); !strings.HasSuffix(c.Reason, "Conflict") || established(gadgets) {
		t.Errorf("CRD %s: NamesAccepted %+v, Established %v; want the naming controller's conflict, not Established", name, c, established(gadgets))
	}

	// Another controller writes a condition on a CRD just created: accepting the CRD as created is left
	// to the controllers; accepting it as it is now keeps that condition.
	created, err := crds.Create(ctx, &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "sprockets.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: "example.com", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "sprockets", Kind: "Sprocket"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object"}}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var other *apiextensionsv1.CustomResourceDefinition
	err = clientretry.RetryOnConflict(clientretry.DefaultRetry, func() error {
		crd, err := crds.Get(ctx, created.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		apihelpers.SetCRDCondition(crd, apiextensionsv1.CustomResourceDefinitionCondition{Type: "Audited", Status: apiextensionsv1.ConditionTrue, Reason: "Test"})
		other, err = crds.UpdateStatus(ctx, crd, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := acceptor.accept(ctx, rc, created); !errors.Is(err, errStatusChanged) {
		t.Errorf("accepting a CRD changed since created: %v, want %v", err, errStatusChanged)
	}
	// (The naming controller may write it first: then it is left to the controllers, which keep it too.)
	if err := acceptor.accept(ctx, rc, other); err != nil && !errors.Is(err, errStatusChanged) {
		t.Fatal(err)
	}
	err = view.waitFor(ctx, map[string]bool{other.Name: true}, established)
	if err != nil {
		t.Fatal(err)
	}
	sprockets, err := crds.Get(ctx, other.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !apihelpers.IsCRDConditionTrue(sprockets, "Audited") {
		t.Errorf("CRD %s lost the condition another controller set: %+v", other.Name, sprockets.Status.Conditions)
	}
}
