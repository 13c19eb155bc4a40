// Command fake-provider serves the Secrets Store CSI Driver's own fake provider
// (sigs.k8s.io/secrets-store-csi-driver/provider/fake) on a unix socket, with the objects
// and files read from a JSON file, so that a test can rotate a secret by rewriting the
// file and sending SIGHUP.
//
// The file: {"objects": {"<id>": "<version>"}, "files": {"<path>": "<contents>"}}.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"sigs.k8s.io/secrets-store-csi-driver/provider/fake"
	"sigs.k8s.io/secrets-store-csi-driver/provider/v1alpha1"
)

type content struct {
	Objects map[string]string `json:"objects"`
	Files   map[string]string `json:"files"`
}

func load(server *fake.MockCSIProviderServer, path string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var c content
	if err := json.Unmarshal(raw, &c); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	files := make([]*v1alpha1.File, 0, len(c.Files))
	for name, body := range c.Files {
		files = append(files, &v1alpha1.File{Path: name, Mode: 0o644, Contents: []byte(body)})
	}
	server.SetObjects(c.Objects)
	server.SetFiles(files)
	return nil
}

func main() {
	socket := flag.String("socket", "", "the unix socket to serve, <providers dir>/<provider name>.sock")
	contents := flag.String("contents", "", "the JSON file of objects and files, read again on SIGHUP")
	flag.Parse()
	server, err := fake.NewMocKCSIProviderServer(*socket)
	if err == nil {
		err = load(server, *contents)
	}
	if err == nil {
		_ = os.Remove(*socket)
		err = server.Start()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake-provider:", err)
		os.Exit(1)
	}
	fmt.Println("fake-provider: serving", *socket)
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGHUP, syscall.SIGTERM, syscall.SIGINT)
	for sig := range signals {
		if sig != syscall.SIGHUP {
			server.Stop()
			return
		}
		if err := load(server, *contents); err != nil {
			fmt.Fprintln(os.Stderr, "fake-provider: reload:", err)
			continue
		}
		fmt.Println("fake-provider: reloaded", *contents)
	}
}
