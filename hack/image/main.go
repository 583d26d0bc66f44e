/*
Copyright 2026 The Graduator Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

// Command image builds Graduator's OCI image without a Docker daemon or a
// registry (`make image`): one layer holding the static binaries on an empty
// base, run as 65532:65532 with the manager as entrypoint, written as an OCI
// image layout and as a tarball that `docker load` and `podman load` read. It
// is its own Go module so that go-containerregistry's dependencies stay out
// of the operator's go.mod.
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's contract; the Dockerfile says the same (a test compares them).
const (
	user       = "65532:65532"
	entrypoint = "/manager"
)

func main() {
	var (
		binDir    = flag.String("binaries", "", "directory holding the static linux binaries manager, graduator and sample-webhook")
		arch      = flag.String("arch", "amd64", "the binaries' architecture (GOARCH)")
		ociDir    = flag.String("oci-layout", "", "write an OCI image layout to this directory (replaced)")
		tarPath   = flag.String("tarball", "", "write a tarball (docker load / podman load) to this file")
		tag       = flag.String("tag", "ghcr.io/graduator/graduator:dev", "the image's name and tag")
		version   = flag.String("version", "dev", "org.opencontainers.image.version")
		revision  = flag.String("revision", "", "org.opencontainers.image.revision (a commit)")
		source    = flag.String("source", "https://github.com/graduator/graduator", "org.opencontainers.image.source")
		createdAt = flag.Int64("created", 0, "creation time in seconds since the epoch (SOURCE_DATE_EPOCH); 0 for reproducible builds")
	)
	flag.Parse()
	if *binDir == "" || (*ociDir == "" && *tarPath == "") {
		log.Fatal("usage: image -binaries DIR [-oci-layout DIR] [-tarball FILE] [-tag REF] [-version V] [-revision SHA]")
	}
	created := time.Unix(*createdAt, 0).UTC()
	img, err := build(*binDir, *arch, created, map[string]string{
		"org.opencontainers.image.source":      *source,
		"org.opencontainers.image.version":     *version,
		"org.opencontainers.image.revision":    *revision,
		"org.opencontainers.image.title":       "graduator",
		"org.opencontainers.image.description": "Graduates CustomResourceDefinitions from one API version to the next",
		"org.opencontainers.image.licenses":    "Apache-2.0",
		"org.opencontainers.image.created":     created.Format(time.RFC3339),
	})
	if err != nil {
		log.Fatal(err)
	}
	ref, err := name.ParseReference(*tag)
	if err != nil {
		log.Fatalf("parse the tag %q: %v", *tag, err)
	}
	if *ociDir != "" {
		if err := os.RemoveAll(*ociDir); err != nil {
			log.Fatal(err)
		}
		p, err := layout.Write(*ociDir, empty.Index)
		if err != nil {
			log.Fatalf("write the OCI layout %s: %v", *ociDir, err)
		}
		if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{
			"org.opencontainers.image.ref.name": ref.String(),
		})); err != nil {
			log.Fatalf("write the image into %s: %v", *ociDir, err)
		}
	}
	if *tarPath != "" {
		if err := tarball.WriteToFile(*tarPath, ref, img); err != nil {
			log.Fatalf("write the tarball %s: %v", *tarPath, err)
		}
	}
	digest, err := img.Digest()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("built %s (%s, linux/%s)\n", ref, digest, *arch)
}

// build puts the binaries into one layer on an empty base.
func build(binDir, arch string, created time.Time, labels map[string]string) (v1.Image, error) {
	layerTar, err := binariesTar(binDir, []string{"manager", "graduator", "sample-webhook"}, created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("make the layer: %w", err)
	}
	base := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:     layer,
		History:   v1.History{Created: v1.Time{Time: created}, CreatedBy: "make image", Comment: "static binaries"},
		MediaType: types.OCILayer,
	})
	if err != nil {
		return nil, fmt.Errorf("add the layer: %w", err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.Architecture, cfg.OS = arch, "linux"
	cfg.Created = v1.Time{Time: created}
	cfg.Config.Entrypoint = []string{entrypoint}
	cfg.Config.Cmd = nil
	cfg.Config.User = user
	cfg.Config.WorkingDir = "/"
	cfg.Config.Labels = labels
	return mutate.ConfigFile(img, cfg)
}

// binariesTar is a tar of the binaries at the root of the file system,
// owned by root and executable by everyone, with a fixed time so the same
// binaries give the same layer.
func binariesTar(dir string, names []string, modTime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, n := range names {
		data, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			return nil, fmt.Errorf("read the binary %s: %w", n, err)
		}
		if !bytes.HasPrefix(data, []byte("\x7fELF")) {
			return nil, fmt.Errorf("%s is not a linux (ELF) binary", n)
		}
		hdr := &tar.Header{
			Typeflag: tar.TypeReg, Name: n, Mode: 0o755, Size: int64(len(data)), ModTime: modTime,
			Uname: "root", Gname: "root", Format: tar.FormatPAX,
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
