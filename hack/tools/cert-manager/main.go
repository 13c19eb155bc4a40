// Command cert-manager-controller runs cert-manager's own control loops (from the
// pinned github.com/cert-manager/cert-manager module) against the local test cluster.
//
// Upstream's binary lives in the separate module .../cmd/controller, which the Go
// module proxy does not serve; this small entry point wires the same registered
// controllers through the module's public pkg/controller API instead. It runs one
// instance without leader election, no webhook, no metrics server and only the
// controllers that self-signed and CA issuers need.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"syscall"

	"k8s.io/klog/v2"

	controllerpkg "github.com/cert-manager/cert-manager/pkg/controller"
	logf "github.com/cert-manager/cert-manager/pkg/logs"

	// Each of these packages registers its controllers or issuer types in init().
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	_ "github.com/cert-manager/cert-manager/pkg/controller/clusterissuers"
	_ "github.com/cert-manager/cert-manager/pkg/controller/issuers"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
)

func main() {
	klog.InitFlags(nil)
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the cluster to manage")
	namespace := flag.String("namespace", "", "namespace to watch (default: all)")
	clusterResources := flag.String("cluster-resource-namespace", "kube-system",
		"namespace of the Secrets that ClusterIssuers reference")
	ownerRef := flag.Bool("enable-certificate-owner-ref", false,
		"make each Certificate the owner of its Secret")
	workers := flag.Int("workers", 5, "workers per controller")
	flag.Parse()

	logf.InitLogs()
	defer logf.FlushLogs()
	if err := run(*kubeconfig, *namespace, *clusterResources, *ownerRef, *workers); err != nil {
		fmt.Fprintln(os.Stderr, "cert-manager-controller:", err)
		os.Exit(1)
	}
}

func run(kubeconfig, namespace, clusterResources string, ownerRef bool, workers int) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx = logf.NewContext(ctx, klog.Background(), "cert-manager-controller")
	log := logf.FromContext(ctx)

	factory, err := controllerpkg.NewContextFactory(ctx, controllerpkg.ContextOptions{
		Kubeconfig:         kubeconfig,
		KubernetesAPIQPS:   50,
		KubernetesAPIBurst: 100,
		Namespace:          namespace,
		IssuerOptions:      controllerpkg.IssuerOptions{ClusterResourceNamespace: clusterResources},
		CertificateOptions: controllerpkg.CertificateOptions{EnableOwnerRef: ownerRef},
	})
	if err != nil {
		return err
	}

	// Every registered controller is started; the imports above decide which exist.
	// A namespaced instance cannot serve ClusterIssuers.
	names := make([]string, 0, len(controllerpkg.Known()))
	for name := range controllerpkg.Known() {
		if namespace != "" && name == "clusterissuers" {
			continue
		}
		names = append(names, name)
	}
	sort.Strings(names)

	loops := make(map[string]controllerpkg.Interface, len(names))
	for _, name := range names {
		loop, err := controllerpkg.Known()[name](factory)
		if err != nil {
			return fmt.Errorf("constructing %s: %w", name, err)
		}
		loops[name] = loop
	}

	// The constructors registered their informers; the shared factories start them once.
	shared, err := factory.Build()
	if err != nil {
		return err
	}
	shared.SharedInformerFactory.Start(ctx.Done())
	shared.KubeSharedInformerFactory.Start(ctx.Done())
	shared.HTTP01ResourceMetadataInformersFactory.Start(ctx.Done())
	log.Info("starting controllers", "controllers", strings.Join(names, ","))

	var wg sync.WaitGroup
	failures := make(chan error, len(loops))
	for name, loop := range loops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := loop.Run(workers, ctx); err != nil {
				failures <- fmt.Errorf("%s: %w", name, err)
				stop()
			}
		}()
	}
	wg.Wait()
	close(failures)
	if err, failed := <-failures; failed {
		return err
	}
	log.Info("control loops exited")
	return nil
}
