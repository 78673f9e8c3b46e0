#include "chat/tool_prompt.h"

#include <algorithm>
#include <string>
#include <vector>

#include "base/json_read.h"

namespace sluice::chat {

using nlohmann::json;
using ojson = nlohmann::ordered_json;

namespace {

constexpr int kMaxSchemaDepth = 64;

json plain(const ojson& v) { return convert_json<json>(v); }

// Keys of `from` that `into` lacks are copied; properties and required are unions.
void merge_into(json& into, const json& from) {
  if (!from.is_object()) return;
  for (const auto& [k, v] : from.items()) {
    if (k == "properties" && into.contains(k) && into[k].is_object() && v.is_object()) {
      for (const auto& [pk, pv] : v.items())
        if (!into[k].contains(pk)) into[k][pk] = pv;
    } else if (k == "required" && into.contains(k) && into[k].is_array() && v.is_array()) {
      for (const json& r : v)
        if (std::find(into[k].begin(), into[k].end(), r) == into[k].end()) into[k].push_back(r);
    } else if (!into.contains(k)) {
      into[k] = v;
    }
  }
}

// A type list without "null" (which becomes nullable), a single type as a string.
void fold_null_type(json& s) {
  if (!s.contains("type") || !s["type"].is_array()) return;
  json types = json::array();
  for (const json& t : s["type"]) {
    if (t == "null") s["nullable"] = true;
    else types.push_back(t);
  }
  if (types.size() == 1) s["type"] = types[0];
  else if (!types.empty()) s["type"] = types;
  else s["type"] = "null";
}

class Resolver {
 public:
  explicit Resolver(const ojson& root) : root_(root) {}

  json resolve(const ojson& node, int depth) {
    if (depth > kMaxSchemaDepth) bad_tool_param("tools", "a tool's parameter schema is nested too deeply");
    if (!node.is_object()) return plain(node);
    json out = node.contains("$ref") ? deref(node.at("$ref"), depth) : json::object();
    for (const auto& [k, v] : node.items()) {
      if (k == "$ref" || k == "$defs" || k == "definitions" || k == "anyOf" || k == "oneOf" || k == "allOf") continue;
      if (k == "properties" && v.is_object()) {
        json props = json::object();
        for (const auto& [pk, pv] : v.items()) props[pk] = resolve(pv, depth + 1);
        out[k] = std::move(props);
      } else if ((k == "items" || k == "additionalProperties") && v.is_object()) {
        out[k] = resolve(v, depth + 1);
      } else {
        out[k] = plain(v);
      }
    }
    if (node.contains("allOf") && node.at("allOf").is_array())
      for (const ojson& b : node.at("allOf")) merge_into(out, resolve(b, depth + 1));
    for (const char* key : {"anyOf", "oneOf"})
      if (node.contains(key) && node.at(key).is_array()) fold_union(out, node.at(key), depth);
    fold_null_type(out);
    return out;
  }

 private:
  json deref(const ojson& ref, int depth) {
    if (!ref.is_string()) bad_tool_param("tools", "$ref must be a string");
    const std::string r = ref.get<std::string>();
    std::string name, where;
    for (const char* prefix : {"#/$defs/", "#/definitions/"})
      if (r.rfind(prefix, 0) == 0) {
        name = r.substr(std::string(prefix).size());
        where = std::string(prefix).substr(2, std::string(prefix).size() - 3);
      }
    if (name.empty() || !root_.contains(where) || !root_.at(where).contains(name))
      bad_tool_param("tools", "$ref '" + r + "' is not a #/$defs/ or #/definitions/ entry of the tool's parameters");
    if (std::find(stack_.begin(), stack_.end(), r) != stack_.end()) return {{"type", "object"}};  // recursive
    stack_.push_back(r);
    json out = resolve(root_.at(where).at(name), depth + 1);
    stack_.pop_back();
    return out;
  }

  void fold_union(json& out, const ojson& branches, int depth) {
    std::vector<json> kept;
    for (const ojson& b : branches) {
      json rb = resolve(b, depth + 1);
      if (rb.value("type", json()) == "null") out["nullable"] = true;
      else kept.push_back(std::move(rb));
    }
    if (kept.empty()) return;
    json types = json::array();
    for (const json& b : kept)
      if (b.contains("type") && b["type"].is_string() &&
          std::find(types.begin(), types.end(), b["type"]) == types.end())
        types.push_back(b["type"]);
    if (kept.front().value("nullable", false)) out["nullable"] = true;
    merge_into(out, kept.front());
    if (types.size() > 1) out["type"] = types;
  }

  const ojson& root_;
  std::vector<std::string> stack_;
};

// A tool result that is a JSON object is given to the template as one; anything else as text.
json response_value(const std::string& content) {
  json v;
  try {
    v = read_json<json>(content, request_json_limits(), "a tool message's content");
  } catch (const JsonReadError& e) {
    if (e.limit()) bad_tool_param("messages", e.what());
    return content;
  }
  if (v.is_object()) return v;
  return content;
}

json native_messages(const json& messages) {
  json out = json::array();
  for (const json& m : messages) {
    const std::string& role = m.at("role").get_ref<const std::string&>();
    json* last = out.empty() ? nullptr : &out.back();
    const bool last_calls = last && last->at("role") == "assistant" && last->contains("tool_calls");
    if (role == "tool" && last_calls) {
      (*last)["tool_responses"].push_back({{"name", m.at("name")}, {"response", response_value(m.at("content"))}});
      continue;
    }
    if (role == "assistant" && !m.contains("tool_calls") && last_calls && last->contains("tool_responses") &&
        last->at("content") == "") {
      (*last)["content"] = m.at("content");  // the answer continues the model turn
      continue;
    }
    out.push_back(m);
  }
  return out;
}

json json_convention_messages(const json& messages, const ToolsParams& tools) {
  json out = json::array();
  bool last_is_result = false;
  for (const json& m : messages) {
    const std::string& role = m.at("role").get_ref<const std::string&>();
    if (role == "tool") {
      const std::string line = "Tool result (" + m.at("name").get<std::string>() +
                               "): " + m.at("content").get<std::string>();
      if (last_is_result) out.back()["content"] = out.back()["content"].get<std::string>() + "\n" + line;
      else out.push_back({{"role", "user"}, {"content", line}});
      last_is_result = true;
      continue;
    }
    last_is_result = false;
    std::string text = m.at("content").get<std::string>();
    if (m.contains("tool_calls"))
      for (const json& c : m.at("tool_calls")) {
        // name before arguments, as the grammar writes it
        const ojson call = {
            {"tool_call", {{"name", c["function"]["name"]}, {"arguments", c["function"]["arguments"]}}}};
        text += (text.empty() ? "" : "\n") + call.dump();
      }
    out.push_back({{"role", role}, {"content", text}});
  }
  if (tools.active()) {
    const std::string sys = json_convention_text(tools);
    if (out.at(0).at("role") == "system") out[0]["content"] = out[0]["content"].get<std::string>() + "\n\n" + sys;
    else out.insert(out.begin(), json{{"role", "system"}, {"content", sys}});
  }
  return out;
}

}  // namespace

json schema_for_declaration(const ojson& schema) { return Resolver(schema).resolve(schema, 0); }

json template_tools(const ToolsParams& t) {
  json out = json::array();
  for (const ToolSpec& s : t.tools)
    out.push_back(
        {{"type", "function"},
         {"function",
          {{"name", s.name}, {"description", s.description}, {"parameters", schema_for_declaration(s.parameters)}}}});
  return out;
}

json template_messages(const json& messages, ToolFormat f, bool merge_responses, const ToolsParams& tools) {
  if (f == ToolFormat::kJson) return json_convention_messages(messages, tools);
  return merge_responses ? native_messages(messages) : messages;
}

json template_input(const json& messages, const ToolsParams& tools, ToolFormat f, bool merge_responses, json& kwargs) {
  json out = template_messages(messages, f, merge_responses, tools);
  if (f == ToolFormat::kGemma4Native && !tools.tools.empty()) kwargs["tools"] = template_tools(tools);
  return out;
}

std::string json_convention_text(const ToolsParams& t) {
  std::string s =
      "You can call functions. To call one, reply with only a JSON object of this form, one object per call:\n"
      "{\"tool_call\": {\"name\": \"FUNCTION_NAME\", \"arguments\": {...}}}\n"
      "The functions (name: description; JSON Schema of the arguments):\n";
  for (const ToolSpec& f : t.tools) s += "- " + f.name + ": " + f.description + "; " + f.parameters.dump() + "\n";
  if (t.choice == ToolChoice::kNamed) s += "Call the function " + t.named + " now.";
  else if (t.choice == ToolChoice::kRequired) s += "Call one of the functions now.";
  else s += "Call a function only when it helps to answer.";
  return s;
}

}  // namespace sluice::chat
