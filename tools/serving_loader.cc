// Loads a SavedModel as TF Serving does and runs its requests, in C++ without Python.
//
//   serving_loader SAVED_MODEL_DIR [--examples=EXAMPLES_TFRECORD] [--rest_body=BODY_JSON]
//
// TF Serving's SavedModelBundle: LoadSavedModel with the tag "serve", then every record of
// assets.extra/tf_serving_warmup_requests (PredictionLog protos) run through its signature, feeds
// and fetches named by the signature's TensorInfo, as the model server does before it answers.
// --examples (serialized tf.Example records): a Classify request of them through each classify
// signature and a Regress request through each regress one. --rest_body: a REST predict body,
// {"signature_name": ..., "instances": [...]} (rows) or {"inputs": ...} (columns), made into
// tensors of the signature's dtypes as TF Serving's REST server does (its JSON is parsed by
// protobuf's, so integers beyond 2^53 are not exact here) and run. Every op of the graph must
// have a CPU kernel in this TensorFlow, the one TF Serving links: a Python-only op
// (tf.py_function) or one only tensorflow_io registers fails here by name. Prints one JSON line
// per step; errors: "error: ..." on stderr, exit 1.
#include <cstdio>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "tensorflow/cc/saved_model/loader.h"
#include "tensorflow/cc/saved_model/reader.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/framework/types.h"
#include "tensorflow/core/lib/io/record_reader.h"
#include "tensorflow/core/platform/env.h"
#include "tensorflow/core/platform/path.h"

namespace {

using tensorflow::Status;
using tensorflow::Tensor;

[[noreturn]] void Fail(const std::string& what) {
  std::cerr << "error: " << what << std::endl;
  std::exit(1);
}

std::string OneLine(const Status& status) {
  std::string text(status.message());
  for (char& c : text) {
    if (c == '\n') c = ' ';
  }
  return text;
}

void Check(const Status& status, const std::string& doing) {
  if (!status.ok()) Fail(doing + ": " + OneLine(status));
}

std::string Quoted(const std::string& text) {
  std::ostringstream out;
  out << '"';
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out << '\\' << c;
    } else if (c < 0x20 || c >= 0x7f) {
      char escaped[8];
      std::snprintf(escaped, sizeof(escaped), "\\u%04x", c);
      out << escaped;
    } else {
      out << c;
    }
  }
  out << '"';
  return out.str();
}

// The protobuf wire format, for tensorflow_serving's PredictionLog: the TF wheel has no generated
// C++ code for TF Serving's protos. Only the length-delimited fields (messages, strings) matter.
uint64_t ReadVarint(const std::string& message, size_t* pos) {
  uint64_t value = 0;
  for (int shift = 0; shift < 64 && *pos < message.size(); shift += 7) {
    unsigned char byte = message[(*pos)++];
    value |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if (!(byte & 0x80)) return value;
  }
  Fail("a warm-up record is not a valid protobuf (a varint runs past its end)");
}

// The payloads of a message's length-delimited fields numbered `number`, in order.
std::vector<std::string> Fields(const std::string& message, uint32_t number) {
  std::vector<std::string> found;
  size_t pos = 0;
  while (pos < message.size()) {
    uint64_t key = ReadVarint(message, &pos);
    switch (key & 7) {
      case 0: ReadVarint(message, &pos); break;
      case 1: pos += 8; break;
      case 5: pos += 4; break;
      case 2: {
        uint64_t length = ReadVarint(message, &pos);
        if (pos + length > message.size()) Fail("a warm-up record is not a valid protobuf");
        if ((key >> 3) == number) found.push_back(message.substr(pos, length));
        pos += length;
        break;
      }
      default: Fail("a warm-up record is not a valid protobuf (wire type " +
                    std::to_string(key & 7) + ")");
    }
  }
  return found;
}

std::string Field(const std::string& message, uint32_t number) {
  std::vector<std::string> found = Fields(message, number);
  return found.empty() ? std::string() : found.back();
}

// tensorflow_serving/apis field numbers.
constexpr uint32_t kLogClassify = 2, kLogRegress = 3, kLogPredict = 6;  // PredictionLog
constexpr uint32_t kLogRequest = 1;                    // ClassifyLog, RegressLog, PredictLog
constexpr uint32_t kRequestModelSpec = 1;              // Classification-, Regression-, PredictRequest
constexpr uint32_t kExamplesInput = 2, kInputExampleList = 1, kExampleListExamples = 1;
constexpr uint32_t kPredictInputs = 2, kMapKey = 1, kMapValue = 2;
constexpr uint32_t kModelSpecSignature = 3;

// tensorflow/cc/saved_model/{tag,signature}_constants.h, which the wheel's headers lack.
constexpr char kServeTag[] = "serve";
constexpr char kClassifyMethodName[] = "tensorflow/serving/classify";
constexpr char kRegressMethodName[] = "tensorflow/serving/regress";
constexpr char kExamplesInputKey[] = "inputs";  // classify and regress signatures' one input

std::string SignatureName(const std::string& request) {
  std::string name = Field(Field(request, kRequestModelSpec), kModelSpecSignature);
  return name.empty() ? "serving_default" : name;
}

std::vector<std::string> ReadRecords(const std::string& path) {
  std::unique_ptr<tensorflow::RandomAccessFile> file;
  Check(tensorflow::Env::Default()->NewRandomAccessFile(path, &file), "opening " + path);
  tensorflow::io::SequentialRecordReader reader(file.get());
  std::vector<std::string> records;
  while (true) {
    tensorflow::tstring record;
    Status status = reader.ReadRecord(&record);
    if (tensorflow::errors::IsOutOfRange(status)) break;
    Check(status, "reading " + path);
    records.emplace_back(record);
  }
  return records;
}

// Every op of the graph and its functions needs a CPU kernel here, as in TF Serving's binary.
void CheckKernels(const tensorflow::MetaGraphDef& meta_graph, const std::string& export_dir) {
  std::set<std::string> with_cpu_kernel;
  const tensorflow::KernelList kernels = tensorflow::GetAllRegisteredKernels();
  for (const auto& kernel : kernels.kernel()) {
    if (kernel.device_type() == tensorflow::DEVICE_CPU ||
        kernel.device_type() == tensorflow::DEVICE_DEFAULT) {
      with_cpu_kernel.insert(kernel.op());
    }
  }
  std::set<std::string> functions, used;
  for (const auto& function : meta_graph.graph_def().library().function()) {
    functions.insert(function.signature().name());
    for (const auto& node : function.node_def()) used.insert(node.op());
  }
  for (const auto& node : meta_graph.graph_def().node()) used.insert(node.op());
  for (const std::string& op : used) {
    if (functions.count(op) || with_cpu_kernel.count(op)) continue;
    const tensorflow::OpRegistrationData* registered = nullptr;
    if (!tensorflow::OpRegistry::Global()->LookUp(op, &registered).ok()) {
      Fail(export_dir + ": the graph needs op " + op + ", which TF Serving's TensorFlow does not "
           "register (a custom op library, such as tensorflow_io's, that the model server lacks)");
    }
    Fail(export_dir + ": the graph needs op " + op + ", which has no CPU kernel in TF Serving's "
         "TensorFlow (a Python-only op such as tf.py_function or tf.numpy_function)");
  }
}

std::string TensorJson(const Tensor& tensor) {
  std::ostringstream out;
  out << "{\"dtype\": \"" << tensorflow::DataTypeString(tensor.dtype()) << "\", \"shape\": [";
  for (int d = 0; d < tensor.dims(); ++d) out << (d ? ", " : "") << tensor.dim_size(d);
  out << "], \"values\": [";
  const int64_t n = tensor.NumElements();
  for (int64_t i = 0; i < n; ++i) {
    out << (i ? ", " : "");
    switch (tensor.dtype()) {
      case tensorflow::DT_FLOAT: {
        char text[32];
        std::snprintf(text, sizeof(text), "%.9g", tensor.flat<float>()(i));
        out << text;
        break;
      }
      case tensorflow::DT_INT64: out << tensor.flat<int64_t>()(i); break;
      case tensorflow::DT_INT32: out << tensor.flat<int32_t>()(i); break;
      case tensorflow::DT_BOOL: out << (tensor.flat<bool>()(i) ? "true" : "false"); break;
      case tensorflow::DT_STRING: out << Quoted(std::string(tensor.flat<tensorflow::tstring>()(i))); break;
      default: Fail("an output of dtype " + tensorflow::DataTypeString(tensor.dtype()) +
                    " that this program does not print");
    }
  }
  out << "]}";
  return out.str();
}

const tensorflow::SignatureDef& FindSignature(const tensorflow::SavedModelBundle& bundle,
                                              const std::string& name) {
  const auto& signatures = bundle.meta_graph_def.signature_def();
  auto found = signatures.find(name);
  if (found == signatures.end()) Fail("a request names signature " + name + ", which the export lacks");
  return found->second;
}

// Runs the signature on inputs keyed by its input names; prints {key: tensor} of every output.
std::string RunSignature(const tensorflow::SavedModelBundle& bundle, const std::string& name,
                         const std::map<std::string, Tensor>& inputs) {
  const tensorflow::SignatureDef& signature = FindSignature(bundle, name);
  std::vector<std::pair<std::string, Tensor>> feeds;
  for (const auto& [key, info] : signature.inputs()) {
    auto given = inputs.find(key);
    if (given == inputs.end()) Fail("signature " + name + ": the request has no input " + key);
    if (given->second.dtype() != info.dtype()) {
      Fail("signature " + name + ": input " + key + " is " +
           tensorflow::DataTypeString(given->second.dtype()) + ", the signature takes " +
           tensorflow::DataTypeString(info.dtype()));
    }
    feeds.emplace_back(info.name(), given->second);
  }
  if (inputs.size() != feeds.size()) Fail("signature " + name + ": the request has inputs it does not take");
  std::vector<std::string> keys, fetches;
  for (const auto& [key, info] : signature.outputs()) {
    keys.push_back(key);
    fetches.push_back(info.name());
  }
  std::vector<Tensor> outputs;
  Check(bundle.session->Run(feeds, fetches, {}, &outputs), "running signature " + name);
  std::ostringstream out;
  out << "{";
  for (size_t i = 0; i < keys.size(); ++i) {
    out << (i ? ", " : "") << Quoted(keys[i]) << ": " << TensorJson(outputs[i]);
  }
  out << "}";
  return out.str();
}

// TF Serving's Classify or Regress (method): the examples as one string tensor into the
// signature's "inputs".
std::string RunExamples(const tensorflow::SavedModelBundle& bundle, const std::string& name,
                        const std::string& method, const std::vector<std::string>& examples) {
  const tensorflow::SignatureDef& signature = FindSignature(bundle, name);
  if (signature.method_name() != method) {
    Fail("signature " + name + " is " + signature.method_name() + ", not " + method);
  }
  Tensor batch(tensorflow::DT_STRING, tensorflow::TensorShape({static_cast<int64_t>(examples.size())}));
  for (size_t i = 0; i < examples.size(); ++i) batch.flat<tensorflow::tstring>()(i) = examples[i];
  return RunSignature(bundle, name, {{kExamplesInputKey, batch}});
}

std::string Replay(const tensorflow::SavedModelBundle& bundle, const std::string& record,
                   std::string* name) {
  for (const auto& [log_field, method] : {std::make_pair(kLogClassify, kClassifyMethodName),
                                          std::make_pair(kLogRegress, kRegressMethodName)}) {
    std::string log = Field(record, log_field);
    if (log.empty()) continue;
    std::string request = Field(log, kLogRequest);
    *name = SignatureName(request);
    std::string example_list = Field(Field(request, kExamplesInput), kInputExampleList);
    return RunExamples(bundle, *name, method, Fields(example_list, kExampleListExamples));
  }
  std::string predict_log = Field(record, kLogPredict);
  if (predict_log.empty()) Fail("a warm-up record is not a classify, regress or predict log");
  std::string request = Field(predict_log, kLogRequest);
  *name = SignatureName(request);
  std::map<std::string, Tensor> inputs;
  for (const std::string& entry : Fields(request, kPredictInputs)) {
    tensorflow::TensorProto proto;
    Tensor tensor;
    if (!proto.ParseFromString(Field(entry, kMapValue)) || !tensor.FromProto(proto)) {
      Fail("signature " + *name + ": a warm-up input is not a valid TensorProto");
    }
    inputs[Field(entry, kMapKey)] = tensor;
  }
  return RunSignature(bundle, *name, inputs);
}

// TF Serving's REST predict: JSON values as tensors of the signature's dtypes.
using JsonValue = google::protobuf::Value;

bool IsB64(const JsonValue& value) {
  return value.has_struct_value() && value.struct_value().fields_size() == 1 &&
         value.struct_value().fields().count("b64");
}

// A value's leaves in row-major order after those already in `leaves`, and its shape (nested
// lists; siblings alike).
void Flatten(const JsonValue& value, const std::string& where, std::vector<int64_t>* shape,
             std::vector<const JsonValue*>* leaves, size_t first_leaf, size_t depth) {
  if (!value.has_list_value()) {
    if (depth != shape->size()) Fail(where + ": lists of different depths");
    leaves->push_back(&value);
    return;
  }
  const int64_t length = value.list_value().values_size();
  if (depth == shape->size() && leaves->size() == first_leaf) {  // the first list this deep
    shape->push_back(length);
  } else if (depth >= shape->size() || (*shape)[depth] != length) {
    Fail(where + ": lists of different lengths or depths");
  }
  for (const JsonValue& item : value.list_value().values()) {
    Flatten(item, where, shape, leaves, first_leaf, depth + 1);
  }
}

void Flatten(const JsonValue& value, const std::string& where, std::vector<int64_t>* shape,
             std::vector<const JsonValue*>* leaves) {
  Flatten(value, where, shape, leaves, leaves->size(), 0);
}

// TF Serving's json_tensor: numbers for float and int dtypes (whole ones for ints), true/false
// for bool, text or {"b64": ...} for string.
Tensor JsonTensor(const std::vector<const JsonValue*>& leaves, const std::vector<int64_t>& dims,
                  tensorflow::DataType dtype, const std::string& where) {
  Tensor tensor(dtype, tensorflow::TensorShape(dims));
  for (size_t i = 0; i < leaves.size(); ++i) {
    const JsonValue& leaf = *leaves[i];
    bool number = leaf.kind_case() == JsonValue::kNumberValue;
    double x = leaf.number_value();
    switch (dtype) {
      case tensorflow::DT_FLOAT:
      case tensorflow::DT_DOUBLE:
        if (!number) Fail(where + ": a value that is not a number, for " + tensorflow::DataTypeString(dtype));
        if (dtype == tensorflow::DT_FLOAT) tensor.flat<float>()(i) = x;
        else tensor.flat<double>()(i) = x;
        break;
      case tensorflow::DT_INT32:
      case tensorflow::DT_INT64:
        if (!number || x != static_cast<double>(static_cast<int64_t>(x))) {
          Fail(where + ": a value that is not a whole number, for " + tensorflow::DataTypeString(dtype));
        }
        if (dtype == tensorflow::DT_INT32) tensor.flat<int32_t>()(i) = static_cast<int32_t>(x);
        else tensor.flat<int64_t>()(i) = static_cast<int64_t>(x);
        break;
      case tensorflow::DT_BOOL:
        if (leaf.kind_case() != JsonValue::kBoolValue) Fail(where + ": a value that is not true or false");
        tensor.flat<bool>()(i) = leaf.bool_value();
        break;
      case tensorflow::DT_STRING: {
        std::string text = leaf.string_value();
        if (IsB64(leaf)) {
          if (!absl::Base64Unescape(leaf.struct_value().fields().at("b64").string_value(), &text)) {
            Fail(where + ": a \"b64\" value that is not base64");
          }
        } else if (leaf.kind_case() != JsonValue::kStringValue) {
          Fail(where + ": a value that is not text or {\"b64\": ...}, for string");
        }
        tensor.flat<tensorflow::tstring>()(i) = text;
        break;
      }
      default:
        Fail(where + ": input of dtype " + tensorflow::DataTypeString(dtype) +
             ", which this loader does not read from JSON");
    }
  }
  return tensor;
}

// The body's tensors for the signature: "instances" (rows: {input: value} each, or bare values
// for a one-input signature) or "inputs" (columns: {input: value}, or the one input's value).
std::map<std::string, Tensor> RestInputs(const google::protobuf::Struct& body,
                                         const tensorflow::SignatureDef& signature,
                                         const std::string& where) {
  const auto& fields = body.fields();
  const auto& infos = signature.inputs();
  std::map<std::string, Tensor> inputs;
  if (fields.count("instances")) {
    const JsonValue& instances = fields.at("instances");
    if (!instances.has_list_value()) Fail(where + ": \"instances\" is not a list");
    const auto& rows = instances.list_value().values();
    for (const auto& [key, info] : infos) {
      std::vector<int64_t> shape = {rows.size()};  // the batch, then each instance's shape
      std::vector<const JsonValue*> leaves;
      std::vector<int64_t> inner;
      for (const JsonValue& row : rows) {
        bool named = row.has_struct_value() && !IsB64(row);
        if (!named && infos.size() > 1) {
          Fail(where + ": an instance names no inputs; the signature takes several");
        }
        if (named && !row.struct_value().fields().count(key)) {
          Fail(where + ": an instance has no " + key);
        }
        const JsonValue& value = named ? row.struct_value().fields().at(key) : row;
        std::vector<int64_t> row_shape;
        Flatten(value, where + ": " + key, &row_shape, &leaves);
        if (&row != &rows[0] && row_shape != inner) Fail(where + ": " + key + " differs in shape between instances");
        inner = row_shape;
      }
      shape.insert(shape.end(), inner.begin(), inner.end());
      inputs[key] = JsonTensor(leaves, shape, info.dtype(), where + ": " + key);
    }
  } else if (fields.count("inputs")) {
    const JsonValue& columns = fields.at("inputs");
    bool named = columns.has_struct_value() && !IsB64(columns);
    if (!named && infos.size() > 1) Fail(where + ": \"inputs\" names no inputs; the signature takes several");
    for (const auto& [key, info] : infos) {
      if (named && !columns.struct_value().fields().count(key)) Fail(where + ": \"inputs\" has no " + key);
      std::vector<int64_t> shape;
      std::vector<const JsonValue*> leaves;
      Flatten(named ? columns.struct_value().fields().at(key) : columns, where + ": " + key, &shape, &leaves);
      inputs[key] = JsonTensor(leaves, shape, info.dtype(), where + ": " + key);
    }
  } else {
    Fail(where + ": a predict body takes \"instances\" or \"inputs\"");
  }
  return inputs;
}

std::string RunRestBody(const tensorflow::SavedModelBundle& bundle, const std::string& path,
                        std::string* name) {
  std::string text;
  Check(tensorflow::ReadFileToString(tensorflow::Env::Default(), path, &text), "reading " + path);
  google::protobuf::Struct body;
  auto parsed = google::protobuf::util::JsonStringToMessage(text, &body);
  if (!parsed.ok()) Fail(path + ": not a JSON object (" + std::string(parsed.message()) + ")");
  *name = body.fields().count("signature_name") ? body.fields().at("signature_name").string_value()
                                                 : "serving_default";
  const tensorflow::SignatureDef& signature = FindSignature(bundle, *name);
  return RunSignature(bundle, *name, RestInputs(body, signature, path));
}

void PrintSignatures(const tensorflow::SavedModelBundle& bundle) {
  std::cout << "{\"signatures\": {";
  bool first = true;
  for (const auto& [name, signature] : bundle.meta_graph_def.signature_def()) {
    std::cout << (first ? "" : ", ") << Quoted(name) << ": {\"method\": " << Quoted(signature.method_name());
    for (const char* side : {"inputs", "outputs"}) {
      const auto& infos = std::string(side) == "inputs" ? signature.inputs() : signature.outputs();
      std::cout << ", \"" << side << "\": {";
      bool first_info = true;
      for (const auto& [key, info] : infos) {
        std::cout << (first_info ? "" : ", ") << Quoted(key) << ": " << Quoted(info.name());
        first_info = false;
      }
      std::cout << "}";
    }
    std::cout << "}";
    first = false;
  }
  std::cout << "}}" << std::endl;
}

}  // namespace

int main(int argc, char** argv) {
  std::string export_dir, examples_path, rest_body_path;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--examples=", 0) == 0) {
      examples_path = arg.substr(11);
    } else if (arg.rfind("--rest_body=", 0) == 0) {
      rest_body_path = arg.substr(12);
    } else if (export_dir.empty() && arg.rfind("--", 0) != 0) {
      export_dir = arg;
    } else {
      export_dir.clear();
      break;
    }
  }
  if (export_dir.empty()) {
    std::cerr << "usage: serving_loader SAVED_MODEL_DIR [--examples=EXAMPLES_TFRECORD] "
                 "[--rest_body=BODY_JSON]" << std::endl;
    return 2;
  }
  tensorflow::MetaGraphDef meta_graph;  // the ops first: the loader's own error is a paragraph
  Check(tensorflow::ReadMetaGraphDefFromSavedModel(export_dir, {kServeTag}, &meta_graph),
        "reading " + export_dir + " with tag serve");
  CheckKernels(meta_graph, export_dir);
  tensorflow::SavedModelBundle bundle;
  Check(tensorflow::LoadSavedModel(tensorflow::SessionOptions(), tensorflow::RunOptions(), export_dir,
                                   {kServeTag}, &bundle),
        "loading " + export_dir + " with tag serve");
  PrintSignatures(bundle);
  const std::string warmup =
      tensorflow::io::JoinPath(export_dir, "assets.extra", "tf_serving_warmup_requests");
  if (tensorflow::Env::Default()->FileExists(warmup).ok()) {
    int index = 0;
    for (const std::string& record : ReadRecords(warmup)) {
      std::string name;
      std::string outputs = Replay(bundle, record, &name);
      std::cout << "{\"warmup\": " << index++ << ", \"signature\": " << Quoted(name)
                << ", \"outputs\": " << outputs << "}" << std::endl;
    }
  }
  if (!examples_path.empty()) {
    std::vector<std::string> examples = ReadRecords(examples_path);
    int run = 0;
    for (const auto& [name, signature] : bundle.meta_graph_def.signature_def()) {
      for (const auto& [api, method] : {std::make_pair("classify", kClassifyMethodName),
                                        std::make_pair("regress", kRegressMethodName)}) {
        if (signature.method_name() != method) continue;
        std::string outputs = RunExamples(bundle, name, method, examples);  // or fails: no half line
        std::cout << "{\"" << api << "\": " << Quoted(name) << ", \"examples\": "
                  << examples.size() << ", \"outputs\": " << outputs << "}" << std::endl;
        ++run;
      }
    }
    if (!run) Fail(export_dir + " has no classify or regress signature for " + examples_path);
  }
  if (!rest_body_path.empty()) {
    std::string name;
    std::string outputs = RunRestBody(bundle, rest_body_path, &name);
    std::cout << "{\"rest_body\": " << Quoted(rest_body_path) << ", \"signature\": "
              << Quoted(name) << ", \"outputs\": " << outputs << "}" << std::endl;
  }
  return 0;
}
