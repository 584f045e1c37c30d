// Loads a SavedModel with TensorFlow's C++ loader, as TensorFlow Serving
// does, and runs one signature on strings read from standard input.
//
//   run_saved_model EXPORT_DIR SIGNATURE REPEATS [OP_LIBRARY...] < lines
//
// The op libraries (e.g. tensorflow-text's) are loaded before the model, as
// TF Serving links them. Each input line is one row: its tab-separated
// fields are the row's values of the signature's string inputs, in the
// inputs' sorted order (one field for `text` alone; `text`, `translation`
// for `score`). Prints one JSON object: every output by name with its
// dtype, shape and values, and the latency of each of REPEATS runs in ms.
// Exits 1 with the loader's message on stderr when anything fails.

#include <chrono>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "tensorflow/cc/saved_model/loader.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/platform/env.h"
#include "tensorflow/core/public/session.h"

namespace {

std::string JsonString(const std::string& s) {
  std::ostringstream out;
  out << '"';
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out << '\\' << c;
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out << buf;
    } else {
      out << c;  // UTF-8 bytes pass through
    }
  }
  out << '"';
  return out.str();
}

std::string JsonTensor(const tensorflow::Tensor& t) {
  std::ostringstream out;
  out << std::setprecision(9);  // float32 round-trips through 9 digits
  out << "{\"dtype\": " << JsonString(tensorflow::DataTypeString(t.dtype()))
      << ", \"shape\": [";
  for (int i = 0; i < t.dims(); ++i) out << (i ? ", " : "") << t.dim_size(i);
  out << "], \"values\": [";
  const int64_t n = t.NumElements();
  for (int64_t i = 0; i < n; ++i) {
    if (i) out << ", ";
    switch (t.dtype()) {
      case tensorflow::DT_STRING:
        out << JsonString(std::string(t.flat<tensorflow::tstring>()(i)));
        break;
      case tensorflow::DT_FLOAT:
        out << t.flat<float>()(i);
        break;
      case tensorflow::DT_INT32:
        out << t.flat<int32_t>()(i);
        break;
      case tensorflow::DT_INT64:
        out << t.flat<int64_t>()(i);
        break;
      default:
        out << "null";
    }
  }
  out << "]}";
  return out.str();
}

int Fail(const std::string& what, const absl::Status& status) {
  std::cerr << what << ": " << status.ToString() << std::endl;
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::cerr << "usage: " << argv[0]
              << " EXPORT_DIR SIGNATURE REPEATS [OP_LIBRARY...] < lines" << std::endl;
    return 2;
  }
  const std::string export_dir = argv[1];
  const std::string signature_name = argv[2];
  const int repeats = std::max(1, std::atoi(argv[3]));
  for (int i = 4; i < argc; ++i) {
    void* handle = nullptr;
    absl::Status status = tensorflow::Env::Default()->LoadDynamicLibrary(argv[i], &handle);
    if (!status.ok()) return Fail(std::string("Loading op library ") + argv[i], status);
  }

  tensorflow::SavedModelBundle bundle;
  absl::Status status = tensorflow::LoadSavedModel(
      tensorflow::SessionOptions(), tensorflow::RunOptions(), export_dir,
      {"serve"}, &bundle);
  if (!status.ok()) return Fail("LoadSavedModel", status);

  const auto& signatures = bundle.meta_graph_def.signature_def();
  auto found = signatures.find(signature_name);
  if (found == signatures.end()) {
    std::cerr << "No signature " << signature_name << " in " << export_dir << std::endl;
    return 1;
  }
  const tensorflow::SignatureDef& signature = found->second;

  std::map<std::string, std::string> sorted_inputs;  // input key -> tensor name
  for (const auto& input : signature.inputs()) sorted_inputs[input.first] = input.second.name();
  std::vector<std::vector<std::string>> rows;
  for (std::string line; std::getline(std::cin, line);) {
    std::vector<std::string> fields;
    std::stringstream stream(line);
    for (std::string field; std::getline(stream, field, '\t');) fields.push_back(field);
    if (!line.empty() && line.back() == '\t') fields.push_back("");
    if (fields.empty()) fields.push_back("");
    if (fields.size() != sorted_inputs.size()) {
      std::cerr << "Row " << rows.size() << " has " << fields.size() << " fields; signature "
                << signature_name << " takes " << sorted_inputs.size() << " inputs" << std::endl;
      return 1;
    }
    rows.push_back(fields);
  }
  std::vector<std::pair<std::string, tensorflow::Tensor>> feeds;
  size_t column = 0;
  for (const auto& input : sorted_inputs) {
    tensorflow::Tensor values(tensorflow::DT_STRING,
                              tensorflow::TensorShape({static_cast<int64_t>(rows.size())}));
    for (size_t i = 0; i < rows.size(); ++i) {
      values.flat<tensorflow::tstring>()(i) = rows[i][column];
    }
    feeds.emplace_back(input.second, values);
    ++column;
  }
  std::map<std::string, std::string> sorted_outputs;  // output key -> tensor name
  for (const auto& output : signature.outputs()) {
    sorted_outputs[output.first] = output.second.name();
  }
  std::vector<std::string> fetches;
  for (const auto& output : sorted_outputs) fetches.push_back(output.second);

  std::vector<tensorflow::Tensor> results;
  std::vector<double> latencies;
  for (int r = 0; r < repeats; ++r) {
    results.clear();
    auto start = std::chrono::steady_clock::now();
    status = bundle.session->Run(feeds, fetches, {}, &results);
    auto end = std::chrono::steady_clock::now();
    if (!status.ok()) return Fail("Session::Run", status);
    latencies.push_back(std::chrono::duration<double, std::milli>(end - start).count());
  }

  std::cout << "{\"outputs\": {";
  size_t i = 0;
  for (const auto& output : sorted_outputs) {
    std::cout << (i ? ", " : "") << JsonString(output.first) << ": " << JsonTensor(results[i]);
    ++i;
  }
  std::cout << "}, \"latency_ms\": [";
  for (size_t r = 0; r < latencies.size(); ++r) std::cout << (r ? ", " : "") << latencies[r];
  std::cout << "]}" << std::endl;
  return 0;
}
