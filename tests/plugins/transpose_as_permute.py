"""A graph transformation from a plugin file: every transpose rewritten as the equivalent permute."""

from dataclasses import replace

from fuzzer.ir import Graph, Node, infer_shapes


def transpose_to_permute(case):
    shapes = infer_shapes(case.graph)
    nodes = []
    for node in case.graph.nodes:
        if node.op == "transpose":
            rank = len(shapes[node.inputs[0]])
            perm = list(range(rank))
            a, b = node.attrs["dim0"] % rank, node.attrs["dim1"] % rank
            perm[a], perm[b] = perm[b], perm[a]
            node = Node(node.name, "permute", node.inputs, {"perm": perm})
        nodes.append(node)
    return replace(case, graph=Graph(case.graph.inputs, tuple(nodes), case.graph.outputs))


def register(api):
    api.add_transformation("transpose-as-permute", base="torch-eager:cpu:float32", transform=transpose_to_permute)
