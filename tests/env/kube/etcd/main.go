// Command etcd is etcd's own server entry point, built from the released go.etcd.io/etcd/server/v3
// module: the module that holds etcd's main package (go.etcd.io/etcd/v3) is not served by the
// module proxy, and its main.go does nothing but call etcdmain.Main.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
