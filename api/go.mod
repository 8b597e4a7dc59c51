module github.com/d8virt/api

go 1.26.0
