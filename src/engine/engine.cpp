#include "engine/engine.h"

#include <algorithm>
#include <string>

#include "common/error.h"
#include "common/utf8.h"

namespace earshot::engine {

std::string Engine::language_problem(const std::string& language) const {
  const Capabilities& c = capabilities();
  if (language == "auto") return "";
  if (!c.multilingual) {
    return language == "en" ? "" : "this model is English-only: use language=en or auto";
  }
  if (std::find(c.languages.begin(), c.languages.end(), language) != c.languages.end()) return "";
  return "unknown language code " + quote_client_text(language);
}

std::string Engine::delay_problem(int delay_ms) const {
  if (delay_ms == 0) return "";
  return std::to_string(delay_ms) + ": this model (family " + capabilities().family +
         ") has no per-stream delay; only Voxtral Realtime models take one";
}

std::string Engine::resolve_policy(const std::string& policy) const {
  const std::vector<std::string>& policies = capabilities().policies;
  if (policies.empty()) throw Error(ErrorCode::kInternal, "engine " + capabilities().family + " offers no policy");
  if (policy.empty()) return policies.front();
  if (std::find(policies.begin(), policies.end(), policy) != policies.end()) return policy;
  policy::throw_unknown_policy(policy, policies);
}

policy::StreamContext policy_context(const StreamRequest& request) {
  policy::StreamContext context;
  context.language = request.language;
  context.keyterms = request.keyterms;
  context.on_warning = request.on_warning;
  context.on_trace = request.on_trace;
  return context;
}

}  // namespace earshot::engine
