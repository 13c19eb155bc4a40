// Command registrar registers a CSI driver with the kubelet through the kubelet's plugin
// registration API (k8s.io/kubelet/pkg/apis/pluginregistration/v1), as
// node-driver-registrar does: it serves Registration on a socket in the kubelet's
// plugins_registry directory and answers GetInfo with the driver's name and CSI endpoint.
// node-driver-registrar itself is not served by the Go module proxy.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"

	"google.golang.org/grpc"
	registration "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

type registrar struct {
	name, endpoint string
}

func (r registrar) GetInfo(context.Context, *registration.InfoRequest) (*registration.PluginInfo, error) {
	return &registration.PluginInfo{
		Type:              registration.CSIPlugin,
		Name:              r.name,
		Endpoint:          r.endpoint,
		SupportedVersions: []string{"1.0.0"},
	}, nil
}

func (r registrar) NotifyRegistrationStatus(_ context.Context, status *registration.RegistrationStatus) (*registration.RegistrationStatusResponse, error) {
	if status.PluginRegistered {
		fmt.Println("registrar: the kubelet registered", r.name)
	} else {
		fmt.Fprintln(os.Stderr, "registrar: the kubelet refused", r.name+":", status.Error)
	}
	return &registration.RegistrationStatusResponse{}, nil
}

func main() {
	socket := flag.String("socket", "", "<kubelet root>/plugins_registry/<driver>-reg.sock")
	name := flag.String("driver", "secrets-store.csi.k8s.io", "the CSI driver's name")
	endpoint := flag.String("endpoint", "", "the path of the driver's CSI socket")
	flag.Parse()
	_ = os.Remove(*socket)
	listener, err := net.Listen("unix", *socket)
	if err != nil {
		fmt.Fprintln(os.Stderr, "registrar:", err)
		os.Exit(1)
	}
	server := grpc.NewServer()
	registration.RegisterRegistrationServer(server, registrar{*name, *endpoint})
	go func() {
		signals := make(chan os.Signal, 1)
		signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
		<-signals
		server.Stop()
	}()
	fmt.Println("registrar: serving", *socket)
	if err := server.Serve(listener); err != nil {
		fmt.Fprintln(os.Stderr, "registrar:", err)
	}
	_ = os.Remove(*socket)
}
