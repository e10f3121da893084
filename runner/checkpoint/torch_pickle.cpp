// Implementation of runner/checkpoint/torch_pickle.h: a small pickle virtual
// machine (protocol 2) over the zip records read by LibTorch's
// PyTorchStreamReader.
#include "runner/checkpoint/torch_pickle.h"

#include <caffe2/serialize/inline_container.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <stdexcept>

namespace zoo::convert {
namespace {

PyRef make(PyObject::Kind k) {
  auto o = std::make_shared<PyObject>();
  o->kind = k;
  return o;
}

// torch.<X>Storage -> dtype of its elements.
torch::ScalarType storage_dtype(const std::string& global) {
  static const std::map<std::string, torch::ScalarType> types = {
      {"torch.FloatStorage", torch::kFloat}, {"torch.DoubleStorage", torch::kDouble},
      {"torch.HalfStorage", torch::kHalf},   {"torch.BFloat16Storage", torch::kBFloat16},
      {"torch.LongStorage", torch::kLong},   {"torch.IntStorage", torch::kInt},
      {"torch.ShortStorage", torch::kShort}, {"torch.CharStorage", torch::kChar},
      {"torch.ByteStorage", torch::kByte},   {"torch.BoolStorage", torch::kBool}};
  auto it = types.find(global);
  if (it == types.end()) throw std::runtime_error("unsupported storage type " + global);
  return it->second;
}

class Unpickler {
 public:
  Unpickler(const std::string& data, caffe2::serialize::PyTorchStreamReader& zip) : data_(data), zip_(zip) {}

  PyRef run() {
    while (true) {
      const uint8_t op = byte();
      switch (op) {
        case 0x80: byte(); break;                          // PROTO
        case 0x95: skip(8); break;                         // FRAME
        case '.': return pop();                            // STOP
        case '(': marks_.push_back(stack_.size()); break;  // MARK
        case 'N': stack_.push_back(make(PyObject::Kind::none)); break;
        case 0x88:
        case 0x89: {  // NEWTRUE / NEWFALSE
          auto o = make(PyObject::Kind::boolean);
          o->b = op == 0x88;
          stack_.push_back(o);
          break;
        }
        case 'J': push_int(static_cast<int32_t>(uint(4))); break;  // BININT
        case 'K': push_int(uint(1)); break;                        // BININT1
        case 'M': push_int(uint(2)); break;                        // BININT2
        case 0x8a: {                                               // LONG1
          const size_t n = byte();
          int64_t v = 0;
          for (size_t k = 0; k < n && k < 8; ++k)
            v |= static_cast<int64_t>(static_cast<uint8_t>(data_[pos_ + k])) << (8 * k);
          if (n > 0 && n < 8 && (static_cast<uint8_t>(data_[pos_ + n - 1]) & 0x80)) v -= int64_t(1) << (8 * n);
          skip(n);
          push_int(v);
          break;
        }
        case 'G': {  // BINFLOAT (big-endian)
          uint64_t bits = 0;
          for (int k = 0; k < 8; ++k) bits = (bits << 8) | byte();
          auto o = make(PyObject::Kind::real);
          std::memcpy(&o->d, &bits, 8);
          stack_.push_back(o);
          break;
        }
        case 'X': push_string(uint(4)); break;                           // BINUNICODE
        case 0x8c: push_string(byte()); break;                           // SHORT_BINUNICODE
        case 'T': push_string(uint(4)); break;                           // BINSTRING
        case 'U': push_string(byte()); break;                            // SHORT_BINSTRING
        case ')': stack_.push_back(make(PyObject::Kind::tuple)); break;  // EMPTY_TUPLE
        case ']': stack_.push_back(make(PyObject::Kind::list)); break;   // EMPTY_LIST
        case '}': stack_.push_back(make(PyObject::Kind::dict)); break;   // EMPTY_DICT
        case 't': {                                                      // TUPLE
          auto o = make(PyObject::Kind::tuple);
          o->items = pop_to_mark();
          stack_.push_back(o);
          break;
        }
        case 0x85:
        case 0x86:
        case 0x87: {  // TUPLE1..3
          auto o = make(PyObject::Kind::tuple);
          o->items.resize(op - 0x84);
          for (size_t k = o->items.size(); k-- > 0;) o->items[k] = pop();
          stack_.push_back(o);
          break;
        }
        case 'a': {  // APPEND
          PyRef v = pop();
          stack_.back()->items.push_back(v);
          break;
        }
        case 'e': {  // APPENDS
          auto vs = pop_to_mark();
          auto& l = stack_.back()->items;
          l.insert(l.end(), vs.begin(), vs.end());
          break;
        }
        case 's': {  // SETITEM
          PyRef v = pop(), k = pop();
          stack_.back()->entries.emplace_back(k, v);
          break;
        }
        case 'u': {  // SETITEMS
          auto kv = pop_to_mark();
          for (size_t k = 0; k + 1 < kv.size(); k += 2) stack_.back()->entries.emplace_back(kv[k], kv[k + 1]);
          break;
        }
        case 'q': memo_[byte()] = stack_.back(); break;         // BINPUT
        case 'r': memo_[uint(4)] = stack_.back(); break;        // LONG_BINPUT
        case 0x94: memo_[memo_.size()] = stack_.back(); break;  // MEMOIZE
        case 'h': stack_.push_back(memo_.at(byte())); break;    // BINGET
        case 'j': stack_.push_back(memo_.at(uint(4))); break;   // LONG_BINGET
        case 'c': {                                             // GLOBAL "module\nname\n"
          auto o = make(PyObject::Kind::global);
          std::string module = line(), name = line();
          o->s = module + "." + name;
          stack_.push_back(o);
          break;
        }
        case 'Q': stack_.push_back(persistent_load(pop())); break;  // BINPERSID
        case 'R': {                                                 // REDUCE
          PyRef args = pop(), fn = pop();
          stack_.push_back(reduce(fn, args));
          break;
        }
        case 'b': pop(); break;  // BUILD: attribute state (e.g. _metadata) is not needed
        default:
          throw std::runtime_error("unsupported pickle opcode 0x" + hex(op) + " at byte " + std::to_string(pos_ - 1));
      }
    }
  }

 private:
  static std::string hex(uint8_t v) {
    const char* d = "0123456789abcdef";
    return {d[v >> 4], d[v & 15]};
  }
  uint8_t byte() {
    if (pos_ >= data_.size()) throw std::runtime_error("pickle ends early");
    return static_cast<uint8_t>(data_[pos_++]);
  }
  uint64_t uint(int n) {
    uint64_t v = 0;
    for (int k = 0; k < n; ++k) v |= static_cast<uint64_t>(byte()) << (8 * k);
    return v;
  }
  void skip(size_t n) { pos_ += n; }
  std::string line() {
    size_t end = data_.find('\n', pos_);
    if (end == std::string::npos) throw std::runtime_error("pickle GLOBAL without newline");
    std::string s = data_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return s;
  }
  void push_int(int64_t v) {
    auto o = make(PyObject::Kind::integer);
    o->i = v;
    stack_.push_back(o);
  }
  void push_string(size_t n) {
    auto o = make(PyObject::Kind::string);
    o->s = data_.substr(pos_, n);
    skip(n);
    stack_.push_back(o);
  }
  PyRef pop() {
    if (stack_.empty()) throw std::runtime_error("pickle stack underflow");
    PyRef v = stack_.back();
    stack_.pop_back();
    return v;
  }
  std::vector<PyRef> pop_to_mark() {
    if (marks_.empty()) throw std::runtime_error("pickle MARK missing");
    size_t m = marks_.back();
    marks_.pop_back();
    std::vector<PyRef> out(stack_.begin() + m, stack_.end());
    stack_.resize(m);
    return out;
  }

  // ('storage', storage_type, key, location, numel) -> a 1-D tensor over the record data/<key>.
  PyRef persistent_load(const PyRef& pid) {
    if (pid->kind != PyObject::Kind::tuple || pid->items.size() < 5 || pid->items[0]->s != "storage")
      throw std::runtime_error("unsupported persistent id in pickle");
    const std::string key = pid->items[2]->s;
    auto cached = storages_.find(key);
    if (cached != storages_.end()) return cached->second;
    const torch::ScalarType dtype = storage_dtype(pid->items[1]->s);
    auto [ptr, size] = zip_.getRecord("data/" + key);
    const int64_t numel = static_cast<int64_t>(size / c10::elementSize(dtype));
    auto o = make(PyObject::Kind::tensor);
    o->tensor = torch::empty({numel}, torch::dtype(dtype));
    std::memcpy(o->tensor.data_ptr(), ptr.get(), numel * c10::elementSize(dtype));
    storages_[key] = o;
    return o;
  }

  PyRef reduce(const PyRef& fn, const PyRef& args) {
    const std::string& f = fn->s;
    const auto& a = args->items;
    if (f == "collections.OrderedDict") return make(PyObject::Kind::dict);
    if (f == "torch._utils._rebuild_tensor_v2" || f == "torch._utils._rebuild_tensor") {
      // (storage, storage_offset, size, stride, ...)
      std::vector<int64_t> size, stride;
      for (const auto& s : a.at(2)->items) size.push_back(s->i);
      for (const auto& s : a.at(3)->items) stride.push_back(s->i);
      auto o = make(PyObject::Kind::tensor);
      o->tensor = a.at(0)->tensor.as_strided(size, stride, a.at(1)->i).clone();
      return o;
    }
    if (f == "torch._utils._rebuild_parameter") return a.at(0);
    throw std::runtime_error("unsupported pickled object " + f);
  }

  const std::string& data_;
  caffe2::serialize::PyTorchStreamReader& zip_;
  size_t pos_ = 0;
  std::vector<PyRef> stack_;
  std::vector<size_t> marks_;
  std::map<uint64_t, PyRef> memo_;
  std::map<std::string, PyRef> storages_;
};

}  // namespace

PyRef read_torch_save(const std::string& path) {
  try {
    caffe2::serialize::PyTorchStreamReader zip(path);
    auto [ptr, size] = zip.getRecord("data.pkl");
    std::string data(static_cast<const char*>(ptr.get()), size);
    return Unpickler(data, zip).run();
  } catch (const std::exception& e) {
    std::string m = e.what();
    if (auto nl = m.find('\n'); nl != std::string::npos) m.resize(nl);
    throw std::runtime_error(path + ": cannot read as a torch.save file (" + m + ")");
  }
}

std::map<std::string, torch::Tensor> tensor_dict(const PyRef& dict) {
  std::map<std::string, torch::Tensor> out;
  if (!dict || dict->kind != PyObject::Kind::dict) throw std::runtime_error("expected a dict of tensors");
  for (const auto& [k, v] : dict->entries) {
    if (v->kind == PyObject::Kind::tensor) out[k->s] = v->tensor;
    else if (v->kind == PyObject::Kind::dict)
      for (const auto& [sub, t] : tensor_dict(v)) out[k->s + "." + sub] = t;
  }
  return out;
}

namespace {

template <class T>
c10::IValue typed_list(const std::vector<c10::IValue>& items) {
  c10::List<T> list;
  for (const auto& v : items) list.push_back(v.to<T>());
  return list;
}

}  // namespace

c10::IValue to_ivalue(const PyRef& value) {
  using Kind = PyObject::Kind;
  switch (value->kind) {
    case Kind::none: return c10::IValue();
    case Kind::boolean: return value->b;
    case Kind::integer: return value->i;
    case Kind::real: return value->d;
    case Kind::string: return value->s;
    case Kind::tensor: return value->tensor;
    case Kind::tuple: {
      std::vector<c10::IValue> items;
      for (const auto& item : value->items) items.push_back(to_ivalue(item));
      return c10::ivalue::Tuple::create(std::move(items));
    }
    case Kind::list: {
      std::vector<c10::IValue> items;
      for (const auto& item : value->items) items.push_back(to_ivalue(item));
      auto all = [&](bool (c10::IValue::*is)() const) {
        return !items.empty() &&
               std::all_of(items.begin(), items.end(), [&](const c10::IValue& v) { return (v.*is)(); });
      };
      if (all(&c10::IValue::isInt)) return typed_list<int64_t>(items);
      if (all(&c10::IValue::isDouble)) return typed_list<double>(items);
      if (all(&c10::IValue::isBool)) return typed_list<bool>(items);
      if (all(&c10::IValue::isString)) return typed_list<std::string>(items);
      if (all(&c10::IValue::isTensor)) return typed_list<at::Tensor>(items);
      c10::impl::GenericList list(c10::AnyType::get());
      for (auto& v : items) list.push_back(std::move(v));
      return list;
    }
    case Kind::dict: {
      const bool int_keys =
          !value->entries.empty() && std::all_of(value->entries.begin(), value->entries.end(),
                                                 [](const auto& e) { return e.first->kind == Kind::integer; });
      c10::impl::GenericDict dict(int_keys ? c10::TypePtr(c10::IntType::get()) : c10::TypePtr(c10::StringType::get()),
                                  c10::AnyType::get());
      for (const auto& [k, v] : value->entries) {
        if (!int_keys && k->kind != Kind::string)
          throw std::runtime_error("a dict with a key that is neither a string nor an integer");
        dict.insert(int_keys ? c10::IValue(k->i) : c10::IValue(k->s), to_ivalue(v));
      }
      return dict;
    }
    case Kind::global: break;
  }
  throw std::runtime_error("a Python object (" + value->s + ") where a checkpoint holds plain values");
}

}  // namespace zoo::convert
