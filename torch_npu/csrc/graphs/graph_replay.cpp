// The per-replay work of a recorded graph of the graph trees, in one call.
//
// A replay of a graph-tree graph does, for every output, the same few things: before the
// replay, invalidate (or move off graph memory) what the previous replay handed out and is
// still held; refill the placeholders of copied inputs; replay; write mutated inputs back;
// then hand out new tensor objects over storages of their own that share the graph's
// memory. Done in Python this costs microseconds per output (a graph with a hundred
// outputs spent more time handing them out than replaying); `ReplayPlan` does it in C++.
// The Python side (torch_npu/compiler/graph_trees/recorded_graph.py) keeps the decisions.
//
// As CUDA graph trees do, the tensor objects handed out are kept and handed out again by
// the next replay when nobody else holds them (or their memory) any more: creating a
// storage and a Python tensor per output per replay cost more than the bookkeeping, and
// fed Python's garbage collector. Whether anybody else holds them is read off reference
// counts: the Python object's (the tensor's own C++ references show there too, since a
// tensor referenced from C++ keeps its Python object alive) and the shared storage's
// (views made of an output).
#include "torch_npu/csrc/graphs/npu_graph.h"

#include <ATen/ATen.h>
#include <ATen/CachedTensorUtils.h>
#include <c10/util/intrusive_ptr.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/extension.h>

#include <cstring>

namespace torch_npu {

void delete_storage_alias(void* ctx) { delete static_cast<c10::Storage*>(ctx); }

c10::Storage make_storage_alias(const c10::Storage& source) {
  const c10::DataPtr& source_ptr = source.data_ptr();
  // An alias of an alias keeps the graph's storage alive, not the alias.
  auto* keep = source_ptr.get_deleter() == &delete_storage_alias
      ? new c10::Storage(*static_cast<c10::Storage*>(source_ptr.get_context()))
      : new c10::Storage(source);
  at::DataPtr ptr(keep->mutable_data(), keep, &delete_storage_alias, source.device());
  return c10::Storage(c10::Storage::use_byte_size_t(), source.nbytes(), std::move(ptr), nullptr, false);
}

namespace {

constexpr int64_t kNotTensor = -1;  // handed out as it is (an int, None)
constexpr int64_t kBorrowed = -2;   // memory of a borrowed input: handed out detached

class ReplayPlan {
 public:
  // `outputs`: the graph's static outputs; `plan[i]`: kNotTensor, kBorrowed, or the index of
  // the graph-owned storage output i lives on (`bases[k]` is a tensor on storage k);
  // `saved[k]`: storage k holds only tensors saved for a backward (moved, not invalidated,
  // when still held at the next replay); `messages[k]`: the error a later read of an
  // invalidated tensor of storage k raises. `copied`/`placeholders`: inputs copied into
  // graph-owned placeholders; `writeback`: those of them the graph mutates. `borrowed` /
  // `borrowed_ptrs`: inputs captured at their own address, and those addresses.
  ReplayPlan(py::object graph, py::list outputs, std::vector<int64_t> plan, std::vector<at::Tensor> bases,
             std::vector<bool> saved, std::vector<std::string> messages, std::vector<int64_t> copied,
             std::vector<at::Tensor> placeholders, std::vector<int64_t> writeback, std::vector<int64_t> borrowed,
             std::vector<int64_t> borrowed_ptrs)
      : graph_obj_(std::move(graph)),
        graph_(graph_obj_.cast<NpuGraph*>()),
        plan_(std::move(plan)),
        bases_(std::move(bases)),
        saved_(std::move(saved)),
        messages_(std::move(messages)),
        copied_(std::move(copied)),
        placeholders_(std::move(placeholders)),
        writeback_(std::move(writeback)),
        borrowed_(std::move(borrowed)),
        borrowed_ptrs_(std::move(borrowed_ptrs)) {
    TORCH_CHECK(borrowed_.size() == borrowed_ptrs_.size(), "ReplayPlan: one address per borrowed input");
    TORCH_CHECK(plan_.size() == static_cast<size_t>(py::len(outputs)), "ReplayPlan: one plan entry per output");
    TORCH_CHECK(saved_.size() == bases_.size() && messages_.size() == bases_.size(),
                "ReplayPlan: one saved flag and message per storage");
    TORCH_CHECK(placeholders_.size() == copied_.size(), "ReplayPlan: one placeholder per copied input");
    for (size_t i = 0; i < plan_.size(); ++i) {
      py::object o = outputs[i];
      outputs_.push_back(o);
      if (plan_[i] == kNotTensor) {
        tensors_.emplace_back();
      } else {
        TORCH_CHECK(THPVariable_Check(o.ptr()), "ReplayPlan: output ", i, " is not a tensor");
        TORCH_CHECK(plan_[i] == kBorrowed || (plan_[i] >= 0 && plan_[i] < static_cast<int64_t>(bases_.size())),
                    "ReplayPlan: output ", i, " names no storage");
        tensors_.push_back(THPVariable_Unpack(o.ptr()));
      }
    }
    for (int64_t w : writeback_) {
      auto it = std::find(copied_.begin(), copied_.end(), w);
      TORCH_CHECK(it != copied_.end(), "ReplayPlan: a written-back input must be a copied one");
      writeback_pos_.push_back(it - copied_.begin());
    }
    outputs_of_.resize(bases_.size());
    for (size_t i = 0; i < plan_.size(); ++i) {
      if (plan_[i] >= 0) outputs_of_[plan_[i]].push_back(i);
    }
    aliases_.resize(bases_.size());
    cached_.resize(plan_.size());
    // Tells autograd that the plan's own reference to a kept tensor does not count when
    // it decides whether a gradient may be stolen instead of copied (AccumulateGrad), as
    // for CUDA graph trees' kept outputs.
    at::caching::set_cached_tensors_enabled(true);
  }

  ~ReplayPlan() { drop_all(); }

  // Moves the saved tensors still held off graph memory (all, with `move_all`), then makes
  // every storage handed out that is still referenced raise its message (or `messages`).
  // Kept tensors nobody holds lose what the last run's autograd attached to them first:
  // a forward's output keeps that run's backward graph (and the tensors it saved) alive.
  void release(bool move_all, const std::vector<std::string>* messages) {
    if (!handed_) return;
    handed_ = false;
    scrub_unheld();
    for (size_t k = 0; k < aliases_.size(); ++k) {
      if (!held(k)) continue;
      if (saved_[k] || move_all) move_tensors(k);
      // Whatever still holds the old memory (a view made outside) must not read the
      // values of a later run silently.
      const std::string& msg = messages != nullptr ? (*messages)[k] : messages_[k];
      c10::Storage storage = aliases_[k];
      drop(k);
      storage.unsafeGetStorageImpl()->release_data_and_set_meta_custom_data_ptr_error_msg_(msg);
    }
  }

  py::list run(py::list args, bool move_all) {
    release(move_all, nullptr);
    {
      // Refilling graph memory must not bump version counters: tensors a pending backward
      // saved were moved off it, but may still share a version counter with it.
      at::AutoDispatchBelowADInplaceOrView below_autograd;
      for (size_t j = 0; j < copied_.size(); ++j) {
        const at::Tensor& src = arg_tensor(args, copied_[j]);
        at::Tensor& dst = placeholders_[j];
        if (src.data_ptr() != dst.data_ptr()) {
          dst.copy_(src);
          ++copied_inputs_;
        }
      }
    }
    graph_->replay();
    {
      at::AutoGradMode no_grad(false);
      for (size_t j : writeback_pos_) arg_tensor(args, copied_[j]).copy_(placeholders_[j]);
    }
    return hand_out();
  }

  // True if every borrowed input is passed at the address it was captured at. Checked on
  // every call for each graph of the signature, so the indices and addresses are kept
  // here rather than converted from Python lists each time.
  bool matches(const py::list& args) const {
    const auto n = static_cast<int64_t>(args.size());
    for (size_t k = 0; k < borrowed_.size(); ++k) {
      if (borrowed_[k] >= n) return false;
      PyObject* item = PyList_GET_ITEM(args.ptr(), borrowed_[k]);
      if (!THPVariable_Check(item)) return false;
      if (reinterpret_cast<int64_t>(THPVariable_Unpack(item).data_ptr()) != borrowed_ptrs_[k]) return false;
    }
    return true;
  }

  // Both ask after scrubbing: a dropped forward output must not keep the tensors that
  // run saved looking held (the tree would record a sibling instead of replaying).
  bool any_alive() {
    if (!handed_) return false;
    scrub_unheld();
    for (size_t k = 0; k < aliases_.size(); ++k)
      if (held(k)) return true;
    return false;
  }

  bool any_saved_alive() {
    if (!handed_) return false;
    scrub_unheld();
    for (size_t k = 0; k < aliases_.size(); ++k)
      if (saved_[k] && held(k)) return true;
    return false;
  }

  int64_t copied_inputs() const { return copied_inputs_; }
  int64_t moved_outputs() const { return moved_outputs_; }

  void clear() {
    drop_all();
    outputs_.clear();
    tensors_.clear();
    bases_.clear();
    placeholders_.clear();
    aliases_.clear();
    cached_.clear();
    outputs_of_.clear();
    saved_.clear();
    handed_ = false;
  }

 private:
  static const at::Tensor& arg_tensor(const py::list& args, int64_t i) {
    TORCH_CHECK(i < static_cast<int64_t>(args.size()), "ReplayPlan: input ", i, " is missing");
    PyObject* item = PyList_GET_ITEM(args.ptr(), i);
    TORCH_CHECK(THPVariable_Check(item), "ReplayPlan: input ", i, " is not a tensor");
    return THPVariable_Unpack(item);
  }

  // True if anything besides this plan references the tensors kept for storage k or the
  // storage itself. The plan holds one reference to the storage and one to each kept
  // tensor's Python object; each kept tensor references the storage once; a Python object
  // of the storage (made by untyped_storage()) references it once more and, when only
  // the storage keeps it, has a single reference itself.
  bool held(size_t k) const {
    const c10::Storage& alias = aliases_[k];
    if (!alias) return false;
    size_t expected = 1 + outputs_of_[k].size();
    PyObject* storage_obj = alias.unsafeGetStorageImpl()->pyobj_slot()->load_pyobj();
    if (storage_obj != nullptr) {
      if (Py_REFCNT(storage_obj) > 1) return true;
      ++expected;
    }
    if (alias.use_count() > expected) return true;
    for (size_t i : outputs_of_[k])
      if (Py_REFCNT(cached_[i].ptr()) > 1) return true;
    return false;
  }

  // A kept tensor handed out again must look new: no autograd history, grad, hooks or
  // requires_grad left from the run that handed it out before. Done as soon as nobody
  // holds it: its history may be all that keeps tensors saved for a backward alive.
  static void scrub(PyObject* obj) {
    auto* var = reinterpret_cast<THPVariable*>(obj);
    var->cdata.unsafeGetTensorImpl()->set_autograd_meta(nullptr);
    Py_CLEAR(var->backward_hooks);
    Py_CLEAR(var->post_accumulate_grad_hooks);
  }

  void scrub_unheld() {
    for (auto& obj : cached_) {
      if (obj && Py_REFCNT(obj.ptr()) == 1) scrub(obj.ptr());
    }
  }

  // Moves the kept tensors of storage k that somebody holds to fresh memory. set_data
  // keeps the very object (and autograd's references to it), on new memory.
  void move_tensors(size_t k) {
    at::AutoGradMode no_grad(false);
    for (size_t i : outputs_of_[k]) {
      if (Py_REFCNT(cached_[i].ptr()) == 1) continue;
      at::Tensor& t = reinterpret_cast<THPVariable*>(cached_[i].ptr())->cdata;
      t.set_data(t.clone());
      ++moved_outputs_;
    }
  }

  // Forgets the tensors kept for storage k (they stay valid for whoever holds them).
  void drop(size_t k) {
    for (size_t i : outputs_of_[k]) {
      if (!cached_[i]) continue;
      at::caching::remove_cached_tensor(reinterpret_cast<THPVariable*>(cached_[i].ptr())->cdata);
      cached_[i] = py::object();
    }
    aliases_[k] = c10::Storage();
  }

  void drop_all() {
    for (size_t k = 0; k < aliases_.size(); ++k) drop(k);
  }

  // False if a kept tensor no longer describes its output: changed in place by its last
  // holder (t_(), resize_() within the memory, set_(), .data = ...).
  bool intact(size_t k) const {
    for (size_t i : outputs_of_[k]) {
      const at::Tensor& t = reinterpret_cast<THPVariable*>(cached_[i].ptr())->cdata;
      const at::Tensor& o = tensors_[i];
      if (!t.has_storage() || t.storage().unsafeGetStorageImpl() != aliases_[k].unsafeGetStorageImpl() ||
          t.dtype() != o.dtype() || t.sizes() != o.sizes() || t.strides() != o.strides() ||
          t.storage_offset() != o.storage_offset()) {
        return false;
      }
    }
    return true;
  }

  py::list hand_out() {
    for (size_t k = 0; k < bases_.size(); ++k) {
      if (aliases_[k] && !intact(k)) drop(k);  // nobody holds them: new ones, no error
      if (aliases_[k]) continue;
      aliases_[k] = make_storage_alias(bases_[k].storage());
      for (size_t i : outputs_of_[k]) {
        const at::Tensor& o = tensors_[i];
        at::Tensor t = at::detail::make_tensor<c10::TensorImpl>(c10::Storage(aliases_[k]), o.key_set(), o.dtype());
        t.unsafeGetTensorImpl()->set_sizes_and_strides(o.sizes(), o.strides(), o.storage_offset());
        at::caching::add_cached_tensor(t);
        cached_[i] = py::reinterpret_steal<py::object>(THPVariable_Wrap(std::move(t)));
      }
    }
    py::list out(outputs_.size());
    for (size_t i = 0; i < outputs_.size(); ++i) {
      const int64_t p = plan_[i];
      if (p == kNotTensor) {
        out[i] = outputs_[i];
      } else if (p == kBorrowed) {
        out[i] = py::reinterpret_steal<py::object>(THPVariable_Wrap(tensors_[i].detach()));
      } else {
        out[i] = cached_[i];
      }
    }
    handed_ = true;
    return out;
  }

  py::object graph_obj_;
  NpuGraph* graph_;
  std::vector<py::object> outputs_;
  std::vector<at::Tensor> tensors_;
  std::vector<int64_t> plan_;
  std::vector<at::Tensor> bases_;
  std::vector<bool> saved_;
  std::vector<std::string> messages_;
  std::vector<int64_t> copied_;
  std::vector<at::Tensor> placeholders_;
  std::vector<int64_t> writeback_;
  std::vector<size_t> writeback_pos_;
  std::vector<int64_t> borrowed_;
  std::vector<int64_t> borrowed_ptrs_;
  std::vector<std::vector<size_t>> outputs_of_;  // per storage: the outputs on it
  std::vector<c10::Storage> aliases_;             // per storage: the alias handed out, if kept
  std::vector<py::object> cached_;                // per output: the tensor handed out, if kept
  bool handed_ = false;
  int64_t copied_inputs_ = 0;
  int64_t moved_outputs_ = 0;
};

// The key of the input signature a graph-tree function picks its recorded graphs by: for
// each input at `indices`, a tensor's sizes, strides, dtype and device, or an int, float,
// bool or None by value. Returns None if an input is of another kind (the caller then
// builds the key in Python). Runs on every call, over up to hundreds of inputs (a
// backward's saved activations); `indices` is read as the Python list it is, not converted.
py::object input_signature(py::list args, py::list indices) {
  std::vector<int64_t> key;
  const auto num_indices = static_cast<Py_ssize_t>(indices.size());
  key.reserve(num_indices * 8);
  const auto n = static_cast<int64_t>(args.size());
  for (Py_ssize_t j = 0; j < num_indices; ++j) {
    const long long i = PyLong_AsLongLong(PyList_GET_ITEM(indices.ptr(), j));
    if (i == -1 && PyErr_Occurred()) throw py::error_already_set();
    if (i < 0 || i >= n) return py::none();
    PyObject* item = PyList_GET_ITEM(args.ptr(), i);
    if (THPVariable_Check(item)) {
      const at::Tensor& t = THPVariable_Unpack(item);
      key.push_back(-1 - t.dim());
      for (int64_t s : t.sizes()) key.push_back(s);
      for (int64_t s : t.strides()) key.push_back(s);
      key.push_back(static_cast<int64_t>(t.scalar_type()));
      key.push_back(static_cast<int64_t>(t.device().type()) * 1024 + t.device().index());
    } else if (PyBool_Check(item)) {
      key.push_back(-10000);
      key.push_back(item == Py_True);
    } else if (PyLong_CheckExact(item)) {
      int overflow = 0;
      const long long v = PyLong_AsLongLongAndOverflow(item, &overflow);
      if (overflow != 0) return py::none();
      key.push_back(-10001);
      key.push_back(v);
    } else if (PyFloat_CheckExact(item)) {
      const double v = PyFloat_AS_DOUBLE(item);
      int64_t bits;
      std::memcpy(&bits, &v, sizeof(bits));
      key.push_back(-10002);
      key.push_back(bits);
    } else if (item == Py_None) {
      key.push_back(-10003);
    } else {
      return py::none();
    }
  }
  return py::bytes(reinterpret_cast<const char*>(key.data()), key.size() * sizeof(int64_t));
}

}  // namespace

void register_graph_replay_bindings(py::module_& m) {
  py::class_<ReplayPlan>(m, "_ReplayPlan")
      .def(py::init<py::object, py::list, std::vector<int64_t>, std::vector<at::Tensor>, std::vector<bool>,
                    std::vector<std::string>, std::vector<int64_t>, std::vector<at::Tensor>, std::vector<int64_t>,
                    std::vector<int64_t>, std::vector<int64_t>>(),
           py::arg("graph"), py::arg("outputs"), py::arg("plan"), py::arg("bases"), py::arg("saved"),
           py::arg("messages"), py::arg("copied"), py::arg("placeholders"), py::arg("writeback"),
           py::arg("borrowed"), py::arg("borrowed_ptrs"))
      .def("run", &ReplayPlan::run, py::arg("args"), py::arg("move_all") = false)
      .def("release",
           [](ReplayPlan& p, bool move_all, std::optional<std::vector<std::string>> messages) {
             p.release(move_all, messages ? &*messages : nullptr);
           },
           py::arg("move_all") = false, py::arg("messages") = std::nullopt)
      .def("matches", &ReplayPlan::matches, py::arg("args"))
      .def("any_alive", &ReplayPlan::any_alive)
      .def("any_saved_alive", &ReplayPlan::any_saved_alive)
      .def_property_readonly("copied_inputs", &ReplayPlan::copied_inputs)
      .def_property_readonly("moved_outputs", &ReplayPlan::moved_outputs)
      .def("clear", &ReplayPlan::clear);
  m.def("_graph_input_signature", &input_signature, py::arg("args"), py::arg("indices"));
}

}  // namespace torch_npu
