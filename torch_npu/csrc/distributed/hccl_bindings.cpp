// Python bindings of the hccl backend (torch_npu._C._hccl), created by _C._init_hccl().
//
// They are not created when torch_npu._C loads: `import torch_npu` only registers the
// backend's name with torch.distributed, and torch_npu.distributed asks for these
// classes when the first hccl group is created.
#include "torch_npu/csrc/distributed/process_group_hccl.h"

#include <torch/csrc/distributed/c10d/Store.hpp>
#include <pybind11/chrono.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/extension.h>

namespace torch_npu::hccl {

namespace {

py::list snapshot_to_python(const std::vector<Board::RankView>& views) {
  py::list out;
  for (const auto& v : views) {
    py::dict d;
    d["rank"] = v.rank;
    d["global_rank"] = v.global_rank;
    d["pid"] = v.pid;
    d["alive"] = v.alive;
    d["visible"] = v.visible;
    d["status"] = v.status;
    d["last_seq"] = v.posted;
    d["waiting_s"] = v.waiting_s >= 0 ? py::object(py::float_(v.waiting_s)) : py::object(py::none());
    d["failure"] = v.failure;
    py::list entries;
    for (const auto& e : v.entries) {
      py::dict ed;
      ed["seq"] = e.seq;
      ed["op"] = e.op;
      ed["description"] = e.description;
      ed["state"] = e.state;
      ed["age_s"] = e.age_s;
      ed["duration_ms"] = e.duration_ms >= 0 ? py::object(py::float_(e.duration_ms)) : py::object(py::none());
      entries.append(ed);
    }
    d["entries"] = entries;
    out.append(d);
  }
  return out;
}

py::object build(py::module_& parent) {
  py::module_ m = parent.def_submodule("_hccl", "The hccl process group and its collective board");

  py::class_<Board, std::shared_ptr<Board>>(m, "Board")
      .def_static("create_shared", &Board::create_shared, py::arg("name"), py::arg("world"), py::arg("rank"),
                  py::arg("group"))
      .def_static("attach_shared", &Board::attach_shared, py::arg("name"), py::arg("world"), py::arg("rank"))
      .def_static("create_private", &Board::create_private, py::arg("world"), py::arg("rank"), py::arg("group"))
      .def("unlink_name", &Board::unlink_name)
      .def_property_readonly("shared", &Board::shared)
      .def("report", [](const Board& b, const std::string& headline) { return b.report(headline, 0); },
           py::call_guard<py::gil_scoped_release>())
      .def("snapshot", [](const Board& b) { return snapshot_to_python(b.snapshot()); });

  auto base_options = py::module_::import("torch._C._distributed_c10d").attr("Backend").attr("Options");
  (void)base_options;  // registered by torch: the base class below must exist first

  auto pg = py::class_<ProcessGroupHCCL, c10d::Backend, c10::intrusive_ptr<ProcessGroupHCCL>>(
      m, "ProcessGroupHCCL", "The c10d backend for npu tensors (named hccl as on Ascend)");

  py::class_<ProcessGroupHCCL::Options, c10d::Backend::Options, c10::intrusive_ptr<ProcessGroupHCCL::Options>>(
      pg, "Options", py::dynamic_attr(), "Options of an hccl group; pass as init_process_group(pg_options=...)")
      .def(py::init([](std::chrono::milliseconds timeout) { return c10::make_intrusive<ProcessGroupHCCL::Options>(timeout); }),
           py::arg("timeout") = kBackendDefaultTimeout);

  pg.def(py::init([](const c10::intrusive_ptr<c10d::Backend>& transport, const std::shared_ptr<Board>& board, int rank,
                     int size, std::chrono::milliseconds timeout, const std::string& group_name,
                     const std::vector<int64_t>& global_ranks, double dump_after_s) {
           auto options = c10::make_intrusive<ProcessGroupHCCL::Options>(timeout);
           options->group_name = group_name;
           options->global_ranks_in_group.assign(global_ranks.begin(), global_ranks.end());
           return c10::make_intrusive<ProcessGroupHCCL>(transport, board, rank, size, options, dump_after_s);
         }),
         py::arg("transport"), py::arg("board"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
         py::arg("group_name") = "", py::arg("global_ranks") = std::vector<int64_t>{},
         py::arg("dump_after_s") = 0.0)
      .def(py::init([](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                       std::chrono::milliseconds timeout) {
             // The documented constructor: the parts are built where the rest of the
             // set-up (environment, store exchanges) lives.
             py::object built = py::module_::import("torch_npu.distributed._backend")
                                    .attr("_build_process_group")(store, rank, size, timeout);
             return built.cast<c10::intrusive_ptr<ProcessGroupHCCL>>();
           }),
           py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout") = kBackendDefaultTimeout)
      .def("report",
           [](const ProcessGroupHCCL& p, const std::string& headline) { return p.state()->board->report(headline, 0); },
           py::arg("headline") = "hccl collective status", py::call_guard<py::gil_scoped_release>())
      .def("snapshot", [](const ProcessGroupHCCL& p) { return snapshot_to_python(p.state()->board->snapshot()); })
      .def("batch_isend_irecv",
           [](ProcessGroupHCCL& p, std::vector<std::string> op_type, std::vector<at::Tensor> tensors,
              std::vector<int64_t> remote_rank_list) {
             return p.batch_isend_irecv(op_type, tensors, std::move(remote_rank_list));
           },
           py::arg("op_type"), py::arg("tensors"), py::arg("remote_rank_list"),
           py::call_guard<py::gil_scoped_release>())
      .def("_arrival_stats",
           [](const ProcessGroupHCCL& p) {
             auto s = p.state()->board->arrival_stats();
             py::dict d;
             d["immediate"] = s.immediate;
             d["polled"] = s.polled;
             d["slept"] = s.slept;
             d["slept_ms"] = s.slept_ns / 1e6;
             return d;
           })
      .def("get_hccl_comm_name",
           [](ProcessGroupHCCL& p, int64_t rank) {
             TORCH_CHECK(rank >= 0 && rank < p.getSize(), "get_hccl_comm_name: rank ", rank,
                         " is not in this group of ", p.getSize(), " ranks");
             return c10::str("hccl_", p.state()->board->group(), "_", p.getSize());
           },
           py::arg("rank") = 0)
      .def_property_readonly("transport", &ProcessGroupHCCL::transport)
      .def_property_readonly("shared_board", [](const ProcessGroupHCCL& p) { return p.state()->board->shared(); })
      .def_property_readonly("broken", [](const ProcessGroupHCCL& p) { return p.state()->broken.load(); })
      .def_property_readonly("options", [](ProcessGroupHCCL& p) { return p.getBackendOptions(); });
  return m;
}

}  // namespace

void add_bindings(py::module_& m) {
  m.def("_init_hccl", []() -> py::object {
    py::module_ parent = py::module_::import("torch_npu._C");
    if (py::hasattr(parent, "_hccl")) return parent.attr("_hccl");
    return build(parent);
  });
}

}  // namespace torch_npu::hccl
