// Command gen regenerates the claimd.v1 Go code in ../../claimdv1 from ../../../../proto
// with nothing but the go command: it compiles the proto with protocompile and runs the
// protoc-gen-go and protoc-gen-go-grpc plugins, pinned as tools in this module's go.mod,
// on the CodeGeneratorRequest it builds (as protoc would).
//
// Run it from this directory:
//
//	go run .          # rewrites ../../claimdv1
//	go run . -check   # generates into a temporary directory; exits 1 naming stale files
//
// It is a module of its own so that users of the client never download its dependencies.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/bufbuild/protocompile"
	"github.com/bufbuild/protocompile/linker"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/pluginpb"
)

// target is the proto file generated, relative to the proto directory.
const target = "claimd/v1/claims.proto"

func main() {
	protoDir := flag.String("proto", "../../../../proto", "the directory holding "+target)
	outDir := flag.String("out", "../../claimdv1", "the directory of the generated package")
	check := flag.Bool("check", false, "do not write: exit 1 when the committed files are stale")
	flag.Parse()

	files, err := generate(*protoDir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(2)
	}
	if *check {
		stale, err := compare(*outDir, files)
		if err != nil {
			fmt.Fprintln(os.Stderr, "gen:", err)
			os.Exit(2)
		}
		if len(stale) > 0 {
			fmt.Fprintf(os.Stderr, "gen: stale generated files (run `go run .` in internal/gen): %s\n",
				strings.Join(stale, ", "))
			os.Exit(1)
		}
		fmt.Println("gen: generated code is up to date")
		return
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(*outDir, name), content, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "gen:", err)
			os.Exit(2)
		}
		fmt.Println("gen: wrote", name)
	}
}

// generate returns the generated files by base name.
func generate(protoDir string) (map[string][]byte, error) {
	compiler := protocompile.Compiler{
		Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
			ImportPaths: []string{protoDir},
		}),
		SourceInfoMode: protocompile.SourceInfoStandard,
	}
	compiled, err := compiler.Compile(context.Background(), target)
	if err != nil {
		return nil, fmt.Errorf("compiling %s: %w", target, err)
	}
	req := &pluginpb.CodeGeneratorRequest{FileToGenerate: []string{target}}
	seen := map[string]bool{}
	var add func(fd protoreflect.FileDescriptor)
	add = func(fd protoreflect.FileDescriptor) {
		if seen[fd.Path()] {
			return
		}
		seen[fd.Path()] = true
		imports := fd.Imports()
		for i := 0; i < imports.Len(); i++ {
			add(imports.Get(i).FileDescriptor)
		}
		fdp := protodesc.ToFileDescriptorProto(fd)
		if fd.Path() != target {
			fdp.SourceCodeInfo = nil
		}
		req.ProtoFile = append(req.ProtoFile, fdp)
	}
	add(compiled[0].(linker.Result))
	out := map[string][]byte{}
	for _, plugin := range []string{"protoc-gen-go", "protoc-gen-go-grpc"} {
		r := proto.Clone(req).(*pluginpb.CodeGeneratorRequest)
		r.Parameter = proto.String("paths=source_relative")
		if plugin == "protoc-gen-go-grpc" {
			r.Parameter = proto.String("paths=source_relative,require_unimplemented_servers=true")
		}
		resp, err := run(plugin, r)
		if err != nil {
			return nil, err
		}
		for _, f := range resp.GetFile() {
			out[filepath.Base(f.GetName())] = []byte(f.GetContent())
		}
	}
	return out, nil
}

// run pipes the request to one plugin (`go tool <plugin>`, pinned in go.mod).
func run(plugin string, req *pluginpb.CodeGeneratorRequest) (*pluginpb.CodeGeneratorResponse, error) {
	in, err := proto.MarshalOptions{Deterministic: true}.Marshal(req)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("go", "tool", plugin)
	cmd.Stdin = bytes.NewReader(in)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s: %v: %s", plugin, err, stderr.String())
	}
	resp := &pluginpb.CodeGeneratorResponse{}
	if err := proto.Unmarshal(stdout.Bytes(), resp); err != nil {
		return nil, fmt.Errorf("%s: %w", plugin, err)
	}
	if resp.Error != nil {
		return nil, fmt.Errorf("%s: %s", plugin, resp.GetError())
	}
	return resp, nil
}

// compare names the files of dir that differ from files, or are missing or extra.
func compare(dir string, files map[string][]byte) ([]string, error) {
	var stale []string
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || !bytes.Equal(got, want) {
			stale = append(stale, name)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if _, ok := files[e.Name()]; !ok && strings.HasSuffix(e.Name(), ".go") {
			stale = append(stale, e.Name()+" (not generated)")
		}
	}
	sort.Strings(stale)
	return stale, nil
}
