module topoplace

go 1.19
