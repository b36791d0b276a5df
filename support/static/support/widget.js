/* The support widget: one <script src=".../static/support/widget.js" data-customer-token="..." defer>
 * (or data-email + data-order) adds a chat button and panel in a Shadow DOM root. It speaks the desk's
 * customer websocket protocol (docs/events.md). No dependencies, no build step. Every piece of server,
 * customer or model text reaches the DOM through textContent: never innerHTML. The shop's name, the agent's,
 * the colour, greeting, logo, languages and hours are the desk's live profile, read when it starts (GET
 * api/widget): the widget names no shop of its own.
 */
(function () {
  "use strict";
  if (window.SundryWidget || window.__supportWidgetStarting) return; // embedded twice: the first one wins
  window.__supportWidgetStarting = true;

  var script = document.currentScript || document.querySelector('script[src*="widget.js"]');
  if (!script) return;

  // -- where the desk is: derived from this script's own src, so a shop on another origin works --------
  var scriptUrl = new URL(script.src, document.baseURI);
  var staticDir = new URL("./", scriptUrl).href; // .../static/support/
  var cut = scriptUrl.pathname.lastIndexOf("/static/");
  var BASE = script.dataset.deskUrl ? new URL(script.dataset.deskUrl, scriptUrl).href
    : scriptUrl.origin + (cut >= 0 ? scriptUrl.pathname.slice(0, cut + 1) : "/");
  var WS_BASE = BASE.replace(/^http/, "ws");

  var identity = script.dataset.customerToken ? {customer_token: script.dataset.customerToken}
    : (script.dataset.email && script.dataset.order)
      ? {email: script.dataset.email, order_number: script.dataset.order} : null;
  // A link e-mailed to the customer (the desk's /c/<token>/ page) opens that one conversation instead.
  var CONVERSATION_LINK = script.dataset.conversationLink || null; // not LINK: the markdown's link pattern has that name
  if (CONVERSATION_LINK) identity = {link: CONVERSATION_LINK};

  // The shop's token is signed with a timestamp, so it changes with every page: key the stored
  // conversation by its signed payload (Django's "payload:timestamp:signature"), which names the customer.
  function identityKey() {
    if (!identity) return null;
    if (identity.link) return "sundry-widget:l:" + identity.link.split(":")[0];
    if (identity.customer_token) return "sundry-widget:c:" + identity.customer_token.split(":")[0];
    return "sundry-widget:o:" + identity.email.trim().toLowerCase() + ":" + identity.order_number.trim().toUpperCase();
  }
  var storage = {
    get: function () { try { return JSON.parse(localStorage.getItem(identityKey())); } catch (e) { return null; } },
    set: function (v) { try { localStorage.setItem(identityKey(), JSON.stringify(v)); } catch (e) { /* private mode */ } },
    drop: function () { try { localStorage.removeItem(identityKey()); } catch (e) { /* private mode */ } },
  };

  // The shop's face first (names, languages, look, hours; the server checked each value): nothing is built
  // before it is in. Should the desk not answer, the widget starts with its own words, naming no shop.
  fetch(BASE + "api/widget", {credentials: "omit"})
    .then(function (r) { return r.ok ? r.json() : {}; })
    .catch(function () { return {}; })
    .then(boot);

  // The widget itself, built once the face is in. (Its body keeps the indentation it had before it waited
  // for the face, so that its history reads line by line.)
  function boot(FACE) {
  FACE = FACE && typeof FACE === "object" ? FACE : {};

  // -- fitting the shop: language, position, colours, layout, hours (data-* on the script tag) --------
  // Every option is checked: a value that is not one of the documented ones is ignored, never used as is.
  // The profile's colour and hours apply unless the script tag sets its own.
  var opt = script.dataset;
  var LANGS = ["en", "de"]; // the widget's catalogues
  var OFFERED = [].concat(FACE.languages || []).filter(function (l) { return LANGS.indexOf(l) >= 0; });
  if (!OFFERED.length) OFFERED = LANGS;
  function pickLanguage() { // data-lang, else the browser's first language the shop offers, else the shop's first
    var wanted = [opt.lang].concat(navigator.languages || [navigator.language]);
    for (var i = 0; i < wanted.length; i++) {
      var base = String(wanted[i] || "").toLowerCase().split(/[-_]/)[0];
      if ((i === 0 ? LANGS : OFFERED).indexOf(base) >= 0) return base;
    }
    return OFFERED[0];
  }
  var LANG = pickLanguage();
  // Dates and times as the customer's own locale writes them when it is of the widget's language ("en-GB",
  // "de-AT": 24-hour clock, their day names), else as the language's main locale does.
  var LOCALE = (function () {
    var mine = [].concat(navigator.languages || [navigator.language]).filter(function (l) {
      return String(l || "").toLowerCase().split(/[-_]/)[0] === LANG;
    })[0];
    try { return mine && Intl.DateTimeFormat.supportedLocalesOf([mine]).length ? mine : LANG; } catch (e) { return LANG; }
  })();
  var DAYS = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]; // data-hours spells days so
  var HEX = /^#(?:[0-9a-f]{3}|[0-9a-f]{6})$/i;
  var FIT = {
    position: opt.position === "left" ? "left" : "right",
    layout: opt.layout === "overlay" ? "overlay" : "dock", // dock: the page shrinks beside the open panel (>= 1024 px)
    accent: HEX.test(opt.accent || "") ? opt.accent : HEX.test(FACE.colour || "") ? FACE.colour : null,
    accentText: HEX.test(opt.accentText || "") ? opt.accentText : null,
    replyTime: /^\d{1,3}[mhd]$/.test(opt.replyTime || "") ? opt.replyTime : null, // "30m", "4h", "1d"
    hours: parseHours(opt.hours || FACE.hours || ""), // "Mon-Fri 09:00-17:30, Sat 10:00-14:00"
    zone: validZone(opt.hours ? opt.hoursZone : FACE.hours_zone) // the hours' IANA time zone; default the customer's own
  };
  // Whom the customer talks to: the shop's name and the agent's in the widget's language, as the lead wrote them.
  var SHOP = String(FACE.shop_name || "").trim().slice(0, 80);
  var AGENT = String((FACE.agent_name || {})[LANG] || "").trim().slice(0, 80);
  function named(withShop, without) { return SHOP ? t(withShop, {shop: SHOP}) : t(without); }
  function agentLabel() { return AGENT ? AGENT.charAt(0).toUpperCase() + AGENT.slice(1) : t("Our assistant"); }
  var DOCK_MIN = 1024, DOCK_WIDTH = 400, PHONE_MAX = 639;

  // The widget's words in each language: the English text is the key, so an untranslated one shows in English.
  var CATALOG = {de: {
    "Close {shop} support chat": "{shop}-Support-Chat schließen", "Close the support chat": "Support-Chat schließen",
    "New message": "Neue Nachricht", "Chat with us": "Chatten Sie mit uns", "{shop} support": "{shop}-Support",
    "Customer support": "Kundensupport",
    "Our assistant replies in seconds": "Unser Assistent antwortet in Sekunden", "Close chat": "Chat schließen",
    "Back to shop": "Zurück zum Shop", "Reconnecting…": "Verbindung wird wiederhergestellt…", "Conversation": "Gespräch",
    "Hi! I'm {agent}. Ask me about an order, a delivery or a refund. A person from our team checks every refund before it's issued.":
      "Hallo! Ich bin {agent}. Fragen Sie mich zu einer Bestellung, einer Lieferung oder einer Erstattung. Jede Erstattung prüft jemand aus unserem Team, bevor sie ausgezahlt wird.",
    "Hi! Ask me about an order, a delivery or a refund. A person from our team checks every refund before it's issued.":
      "Hallo! Fragen Sie mich zu einer Bestellung, einer Lieferung oder einer Erstattung. Jede Erstattung prüft jemand aus unserem Team, bevor sie ausgezahlt wird.",
    "Suggestions": "Vorschläge", "Where is my order?": "Wo ist meine Bestellung?",
    "My parcel never arrived": "Mein Paket ist nie angekommen", "An item arrived damaged": "Ein Artikel kam beschädigt an",
    "New messages ↓": "Neue Nachrichten ↓", "The assistant is working": "Der Assistent arbeitet",
    "Our team is reviewing your request": "Unser Team prüft Ihre Anfrage",
    "A person checks this before anything is done. You'll see their decision here; you can keep writing.":
      "Jemand prüft das, bevor etwas passiert. Die Entscheidung sehen Sie hier; Sie können weiter schreiben.",
    "Our team has approved it": "Unser Team hat es genehmigt",
    "The assistant is confirming the details here.": "Der Assistent bestätigt die Einzelheiten hier.",
    "Our team has decided": "Unser Team hat entschieden",
    "The assistant is explaining their decision here.": "Der Assistent erklärt die Entscheidung hier.",
    "It couldn't be reviewed in time": "Das konnte nicht rechtzeitig geprüft werden",
    "Nothing has been done yet. A member of our team will follow up here.": "Noch ist nichts passiert. Jemand aus unserem Team meldet sich hier.",
    "Support is being set up": "Der Support wird gerade eingerichtet",
    "We can't take messages here yet. Please come back a little later.":
      "Hier können wir noch keine Nachrichten annehmen. Bitte schauen Sie etwas später wieder vorbei.",
    "Your message": "Ihre Nachricht", "Write a message…": "Nachricht schreiben…", "Send message": "Nachricht senden",
    "Support team": "Support-Team", "{shop} team": "{shop}-Team", "Our team": "Unser Team", "Our assistant": "Unser Assistent",
    "{name} from our team is here": "{name} aus unserem Team ist da", "A member of our team is here": "Jemand aus unserem Team ist da",
    "Waiting for a member of our team": "Wartet auf jemanden aus unserem Team",
    "This conversation is closed": "Dieses Gespräch ist abgeschlossen",
    "Sending…": "Wird gesendet…", "Waiting for connection…": "Wartet auf Verbindung…",
    "Your message could not be sent.": "Ihre Nachricht konnte nicht gesendet werden.",
    "We couldn't reach our support desk. Check your connection and try again.": "Wir konnten unseren Support nicht erreichen. Prüfen Sie Ihre Verbindung und versuchen Sie es noch einmal.",
    "We couldn't start the chat. ": "Wir konnten den Chat nicht starten. ",
    "The chat was disconnected. Reload the page to continue.": "Der Chat wurde getrennt. Laden Sie die Seite neu, um weiterzumachen.",
    "This chat has ended. Send a message to start a new one.": "Dieser Chat ist beendet. Schreiben Sie eine Nachricht, um einen neuen zu beginnen.",
    "Continue": "Weiter", "Code from the e-mail": "Code aus der E-Mail",
    "For your security, enter the 8-digit code we just e-mailed to {email}.": "Zu Ihrer Sicherheit: Geben Sie den 8-stelligen Code ein, den wir gerade an {email} geschickt haben.",
    "Looking up your order": "Ich sehe mir Ihre Bestellung an", "Checking the carrier's tracking": "Ich prüfe die Sendungsverfolgung",
    "Reading our policies": "Ich lese unsere Richtlinien", "Preparing a refund": "Ich bereite eine Erstattung vor",
    "Contacting the seller": "Ich kontaktiere den Verkäufer", "Handing over to a specialist": "Ich übergebe an unser Team",
    "Wrapping up": "Ich fasse zusammen", "Thinking": "Ich denke nach", "Compacting the history": "Ich fasse das Gespräch zusammen",
    // business hours, reply time, typing, rating
    "Our team is here now": "Unser Team ist jetzt da", "Our team is away": "Unser Team ist gerade nicht da",
    "back {when}": "wieder da {when}", "replies within {time}": "antwortet innerhalb von {time}",
    "{n} minutes": "{n} Minuten", "{n} hours": "{n} Stunden", "{n} days": "{n} Tagen", "1 hour": "einer Stunde", "1 day": "einem Tag",
    "Hours: {hours} ({zone})": "Zeiten: {hours} ({zone})", "{city} time": "Ortszeit {city}", "your time": "Ihre Ortszeit",
    "{name} is typing…": "{name} schreibt…", "Our team is typing…": "Unser Team schreibt…",
    "How did we do?": "Wie waren wir?", "Rate this conversation": "Bewerten Sie dieses Gespräch",
    "{n} of 5 stars": "{n} von 5 Sternen", "Tell us more (optional)": "Erzählen Sie uns mehr (optional)",
    "Send rating": "Bewertung senden", "Thank you for your rating.": "Danke für Ihre Bewertung.",
    "You rated this conversation {n} of 5.": "Sie haben dieses Gespräch mit {n} von 5 bewertet.", "Change": "Ändern",
    "Choose 1 to 5 stars first.": "Wählen Sie zuerst 1 bis 5 Sterne.",
    "We couldn't save your rating. ": "Wir konnten Ihre Bewertung nicht speichern. ",
    // the list of a signed-in customer's conversations
    "Your conversations": "Ihre Gespräche", "Start a new conversation": "Neues Gespräch beginnen",
    "Loading your conversations…": "Ihre Gespräche werden geladen…", "No earlier conversations yet.": "Noch keine früheren Gespräche.",
    "We couldn't load your conversations. ": "Wir konnten Ihre Gespräche nicht laden. ",
    "This conversation": "Dieses Gespräch", "Open": "Offen", "Waiting for our team": "Wartet auf unser Team",
    "With our team": "Bei unserem Team", "Closed": "Abgeschlossen", "You: ": "Sie: ", "Our team: ": "Unser Team: ",
    "Image: {name}": "Bild: {name}", "untitled": "ohne Titel",
    "Something went wrong on our side. Please try again in a moment.": "Bei uns ist etwas schiefgegangen. Bitte versuchen Sie es gleich noch einmal.",
    // the server's refusals, by code (the English words come from the server)
    "error:empty": "Ihre Nachricht ist leer.",
    "error:too_long": "Ihre Nachricht ist zu lang – bitte bleiben Sie unter {limit} Zeichen.",
    "error:control_character": "Ihre Nachricht enthält ein Steuerzeichen, das wir nicht anzeigen können; bitte entfernen Sie es.",
    "error:invalid_text": "Ihre Nachricht enthält Zeichen, die kein gültiger Text sind; bitte tippen Sie sie neu.",
    "error:not_text": "Die Nachricht muss Text sein.",
    "error:rate_limited": "Sie schreiben schneller, als wir lesen können – bitte warten Sie {seconds} s und versuchen Sie es noch einmal."
  }};
  /* t("English text", {name: ...}) -> the text in the widget's language, {placeholders} filled in. */
  function t(text, values) {
    var said = (CATALOG[LANG] && CATALOG[LANG][text]) || text;
    return values ? said.replace(/\{(\w+)\}/g, function (m, k) { return k in values ? String(values[k]) : m; }) : said;
  }
  /* A refusal from the server in the widget's language: its code's words, else the server's own. */
  function refusal(code, serverWords, values) {
    var key = "error:" + code;
    return LANG !== "en" && CATALOG[LANG] && CATALOG[LANG][key] ? t(key, values) : serverWords;
  }

  // Business hours: "Mon-Fri 09:00-17:30, Sat 10:00-14:00" -> [{days: [1..5], from: 540, to: 1050}, ...].
  function parseHours(text) {
    var out = [];
    var ok = String(text).split(/\s*[,;]\s*/).filter(Boolean).every(function (part) {
      var m = /^([A-Za-z]{3})(?:\s*-\s*([A-Za-z]{3}))?\s+(\d{1,2}):(\d{2})\s*-\s*(\d{1,2}):(\d{2})$/.exec(part.trim());
      if (!m) return false;
      var a = dayIndex(m[1]), b = m[2] ? dayIndex(m[2]) : a, from = +m[3] * 60 + +m[4], to = +m[5] * 60 + +m[6];
      if (a < 0 || b < 0 || from >= to || to > 24 * 60 || +m[4] > 59 || +m[6] > 59) return false;
      var days = [];
      for (var d = a; ; d = (d + 1) % 7) { days.push(d); if (d === b) break; }
      out.push({days: days, from: from, to: to, text: part.trim()});
      return true;
    });
    return ok && out.length ? out : null;
  }
  function dayIndex(name) {
    var n = name.charAt(0).toUpperCase() + name.slice(1, 3).toLowerCase();
    return DAYS.indexOf(n);
  }
  function validZone(zone) {
    if (!zone || !/^[A-Za-z_]+(?:\/[A-Za-z_+-]+){0,2}$/.test(zone)) return null;
    try { new Intl.DateTimeFormat("en", {timeZone: zone}); return zone; } catch (e) { return null; }
  }

  // -- safe markdown ---------------------------------------------------------------------------------
  /* renderMarkdown(text) -> DocumentFragment. Contract: the fragment contains only p, br, strong, em,
   * code, pre, ul, ol, li, blockquote, span and a elements; every piece of the input ends up in a text node
   * (raw HTML stays literal text); a elements only for absolute http/https/mailto URLs without a user name
   * or password, with target=_blank and rel="noopener noreferrer nofollow"; images are never loaded (alt
   * text, plus the URL as a link). A link never shows one address and opens another (addressLink). */
  function el(tag, cls, text) {
    var n = document.createElement(tag);
    if (cls) n.className = cls;
    if (text != null) n.textContent = text;
    return n;
  }
  function safeUrl(raw) { // credentials too: https://shop.example@attacker.test/ reads as the shop
    try {
      var u = new URL(raw);
      return /^(https?|mailto):$/.test(u.protocol) && !u.username && !u.password ? u.href : null;
    } catch (e) { return null; }
  }
  function link(href, text) {
    var a = el("a", null, text);
    a.href = href; a.target = "_blank"; a.rel = "noopener noreferrer nofollow";
    return a;
  }

  // The shop's hosts (data-link-hosts="shop.example, .shop.example": a leading dot adds the subdomains),
  // else this page's host. Links there show their text; any other shows where it really goes.
  var LINK_HOSTS = (script.dataset.linkHosts || location.hostname).split(/[\s,]+/).map(function (h) {
    try { return (h.charAt(0) === "." ? "." : "") + new URL("http://" + h.replace(/^\./, "")).hostname; }
    catch (e) { return null; } // as the browser spells it: lower case, look-alike names as xn--
  }).filter(Boolean);
  function listedHost(host) {
    return LINK_HOSTS.some(function (h) {
      return h.charAt(0) === "." ? host === h.slice(1) || host.slice(-h.length) === h : host === h;
    });
  }
  function mailboxes(u) { try { return decodeURIComponent(u.pathname); } catch (e) { return u.pathname; } }
  function listed(u) {
    if (u.protocol !== "mailto:") return listedHost(u.hostname);
    return mailboxes(u).split(",").every(function (m) { return listedHost(m.split("@").pop().trim().toLowerCase()); });
  }
  function destination(u) { return u.protocol === "mailto:" ? mailboxes(u) : u.host; }
  // Text that names an address: a scheme, www., or a domain name (any script; dots as URLs read them).
  var ADDRESSY = /[a-z][a-z0-9+.-]*:\/\/|\bwww[.\u3002\uff0e\uff61]|mailto:|[\p{L}\p{N}-][.\u3002\uff0e\uff61]\p{L}{2,}/iu;
  function sameTarget(text, u) {
    try {
      var t = /^[a-z][a-z0-9+.-]*:/i.test(text) ? new URL(text)
        : new URL(u.protocol === "mailto:" ? "mailto:" + text : u.protocol + "//" + text);
      return t.href.replace(/\/$/, "") === u.href.replace(/\/$/, "");
    } catch (e) { return false; }
  }
  /* A link whose text fill(a) renders. Text that names an address other than the target is replaced by
   * the target; a link off the shop's hosts also shows its destination, "(host)" or "(address)", unless
   * the text already spells it out. */
  function addressLink(href, fill) {
    var u = new URL(href), a = link(u.href, null);
    fill(a);
    var text = a.textContent.trim();
    if (!text || (ADDRESSY.test(text) && !sameTarget(text, u))) {
      a.textContent = u.protocol === "mailto:" ? mailboxes(u) : u.href;
    }
    var dest = destination(u);
    a.dataset.destination = dest;
    if (!listed(u) && a.textContent.toLowerCase().indexOf(dest.toLowerCase()) < 0) {
      a.appendChild(el("span", "sw-md-dest", " (" + dest + ")"));
    }
    return a;
  }
  function textLink(href, text) { return addressLink(href, function (a) { a.textContent = text; }); }
  var TARGET = "((?:[^\\s()]|\\([^\\s()]*\\))*)(?:\\s+\"[^\"\\n]*\")?\\s*\\)"; // one level of (parens) in a URL
  var IMG = new RegExp("^!\\[([^\\]\\n]*)\\]\\(\\s*" + TARGET);
  var LINK = new RegExp("^\\[([^\\[\\]\\n]+)\\]\\(\\s*" + TARGET);
  var CODE = /^(`+)([\s\S]*?[^`])\1(?!`)/;
  var STRONG = /^(\*\*|__)(?=\S)([\s\S]*?\S)\1/;
  var EM = /^(\*|_)(?=[^\s*_])([\s\S]*?[^\s*_])\1(?![*_])/;
  var BARE = /^https?:\/\/[^\s<>()]*[^\s<>().,;:!?'"]/;

  function inline(text, parent, inLink) {
    var buf = "", i = 0, m;
    function flush() { if (buf) { parent.appendChild(document.createTextNode(buf)); buf = ""; } }
    while (i < text.length) {
      var c = text[i], rest = text.slice(i), prev = i ? text[i - 1] : " ";
      if (c === "\\" && /[\\`*_\[\]()!#>~-]/.test(text[i + 1] || "")) { buf += text[i + 1]; i += 2; continue; }
      if (c === "`" && (m = CODE.exec(rest))) { flush(); parent.appendChild(el("code", null, m[2])); }
      else if (c === "!" && (m = IMG.exec(rest))) {
        flush();
        var img = el("span", "sw-md-img", t("Image: {name}", {name: m[1] || t("untitled")}));
        var src = !inLink && /^https?:/i.test(m[2]) && safeUrl(m[2]);
        if (src) { img.appendChild(document.createTextNode(" ")); img.appendChild(textLink(src, src)); }
        parent.appendChild(img);
      } else if (c === "[" && !inLink && (m = LINK.exec(rest))) {
        var href = safeUrl(m[2]);
        if (!href) { buf += m[0]; i += m[0].length; continue; } // javascript: and friends stay literal text
        flush();
        parent.appendChild(addressLink(href, function (a) { inline(m[1], a, true); }));
      } else if (c === "h" && !inLink && !/\w/.test(prev) && (m = BARE.exec(rest)) && safeUrl(m[0])) {
        flush(); parent.appendChild(textLink(safeUrl(m[0]), m[0]));
      } else if ((c === "*" || c === "_") && (m = STRONG.exec(rest)) && (c === "*" || !/\w/.test(prev))) {
        flush(); var b = el("strong"); inline(m[2], b, inLink); parent.appendChild(b);
      } else if ((c === "*" || c === "_") && (m = EM.exec(rest)) &&
                 (c === "*" || (!/\w/.test(prev) && !/\w/.test(text[i + m[0].length] || "")))) {
        flush(); var em = el("em"); inline(m[2], em, inLink); parent.appendChild(em);
      } else { buf += c; i += 1; continue; }
      i += m[0].length;
    }
    flush();
  }

  var FENCE = /^\s{0,3}(```+|~~~+)\s*([\w+-]*)\s*$/;
  var BULLET = /^\s*[-*+]\s+(.*)$/;
  var NUMBER = /^\s*(\d{1,9})[.)]\s+(.*)$/;
  var HEADING = /^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$/;
  var QUOTE = /^\s{0,3}>\s?(.*)$/;
  function startsBlock(line) { return FENCE.test(line) || BULLET.test(line) || NUMBER.test(line) || HEADING.test(line) || QUOTE.test(line); }
  function lines(parent, list) {
    list.forEach(function (line, k) { if (k) parent.appendChild(el("br")); inline(line, parent, false); });
  }

  function renderMarkdown(src) {
    var frag = document.createDocumentFragment();
    var rows = String(src == null ? "" : src).replace(/\r\n?/g, "\n").split("\n");
    var i = 0, m;
    while (i < rows.length) {
      var line = rows[i];
      if (!line.trim()) { i++; continue; }
      if ((m = FENCE.exec(line))) {
        var body = [], close = m[1];
        for (i++; i < rows.length && rows[i].trim() !== close; i++) body.push(rows[i]);
        i++;
        var pre = el("pre"), code = el("code", null, body.join("\n"));
        if (m[2]) code.dataset.lang = m[2];
        pre.appendChild(code); frag.appendChild(pre);
      } else if (BULLET.test(line) || NUMBER.test(line)) {
        var ordered = !BULLET.test(line), pattern = ordered ? NUMBER : BULLET;
        var list = el(ordered ? "ol" : "ul"), item = null, texts = [];
        if (ordered && +NUMBER.exec(line)[1] !== 1) list.start = +NUMBER.exec(line)[1];
        var end = function () { if (item) { lines(item, texts); list.appendChild(item); } };
        for (; i < rows.length && rows[i].trim(); i++) {
          if ((m = pattern.exec(rows[i]))) { end(); item = el("li"); texts = [m[ordered ? 2 : 1]]; }
          else if (startsBlock(rows[i]) && !/^\s/.test(rows[i])) break;
          else texts.push(rows[i].trim()); // a continuation of the item
        }
        end(); frag.appendChild(list);
      } else if ((m = HEADING.exec(line))) {
        var h = el("p", "sw-md-heading"), s = el("strong");
        inline(m[1], s, false); h.appendChild(s); frag.appendChild(h); i++;
      } else if (QUOTE.test(line)) {
        var quoted = [];
        for (; i < rows.length && (m = QUOTE.exec(rows[i])); i++) quoted.push(m[1]);
        var q = el("blockquote"); lines(q, quoted); frag.appendChild(q);
      } else {
        var para = [line];
        for (i++; i < rows.length && rows[i].trim() && !startsBlock(rows[i]); i++) para.push(rows[i]);
        var p = el("p"); lines(p, para); frag.appendChild(p);
      }
    }
    return frag;
  }

  // -- the DOM ---------------------------------------------------------------------------------------
  function svg(d) {
    var NS = "http://www.w3.org/2000/svg", s = document.createElementNS(NS, "svg"), p = document.createElementNS(NS, "path");
    s.setAttribute("viewBox", "0 0 24 24"); s.setAttribute("aria-hidden", "true"); s.setAttribute("focusable", "false");
    p.setAttribute("d", d); s.appendChild(p);
    return s;
  }
  function tid(node, id) { node.setAttribute("data-testid", id); return node; }
  var ICON_CHAT = "M4 5.5A2.5 2.5 0 0 1 6.5 3h11A2.5 2.5 0 0 1 20 5.5v8a2.5 2.5 0 0 1-2.5 2.5H10l-4.2 3.6A.5.5 0 0 1 5 19.2V16h-.5A.5.5 0 0 1 4 15.5z";
  var ICON_CLOSE = "M6.4 5 5 6.4 10.6 12 5 17.6 6.4 19l5.6-5.6 5.6 5.6 1.4-1.4-5.6-5.6L19 6.4 17.6 5 12 10.6z";
  var ICON_SEND = "M3.4 20.4 21 12 3.4 3.6 3.4 10l12.6 2-12.6 2z";

  var host = tid(el("div"), "widget-host");
  host.id = "sundry-support-widget";
  var shadow = host.attachShadow({mode: "open"});
  var css = el("link"); css.rel = "stylesheet"; css.href = staticDir + "widget.css";
  var root = el("div", "sw-root"); root.hidden = true; // shown once the stylesheet is in, no flash of bare markup
  css.onload = css.onerror = function () { root.hidden = false; };
  shadow.appendChild(css); shadow.appendChild(root);

  var button = tid(el("button", "sw-launcher"), "widget-button");
  button.type = "button"; // named by its visible label while closed (axe: label-content-name-mismatch), "Close …" while open
  button.setAttribute("aria-expanded", "false"); button.setAttribute("aria-controls", "sw-panel");
  var unread = tid(el("span", "sw-unread"), "widget-unread"); unread.hidden = true;
  unread.appendChild(el("span", "sw-visually-hidden", t("New message")));
  var chatIcon = svg(ICON_CHAT), closeIcon = svg(ICON_CLOSE);
  chatIcon.classList.add("sw-icon-chat"); closeIcon.classList.add("sw-icon-close");
  [chatIcon, closeIcon, el("span", "sw-launcher-label", String(FACE.launcher_label || "").slice(0, 40) || t("Chat with us")), unread].forEach(function (n) { button.appendChild(n); });

  var panel = tid(el("section", "sw-panel"), "widget-panel");
  panel.id = "sw-panel"; panel.hidden = true;
  panel.setAttribute("role", "dialog"); panel.setAttribute("aria-labelledby", "sw-title");
  var header = el("header", "sw-header"), heading = el("div", "sw-heading");
  var title = el("h2", "sw-title", named("{shop} support", "Customer support")); title.id = "sw-title";
  var subtitle = tid(el("p", "sw-subtitle", t("Our assistant replies in seconds")), "widget-subtitle");
  var closeBtn = tid(el("button", "sw-close"), "widget-close");
  closeBtn.type = "button"; closeBtn.setAttribute("aria-label", t("Close chat")); closeBtn.appendChild(svg(ICON_CLOSE));
  heading.appendChild(title); heading.appendChild(subtitle);
  header.appendChild(avatar()); header.appendChild(heading); header.appendChild(closeBtn);
  function avatar() { // the shop's logo (https or the desk's own, checked by the desk), else its initial
    var a = el("span", "sw-avatar", FACE.logo_url ? null : (SHOP.charAt(0) || "?").toUpperCase());
    if (FACE.logo_url && /^(https:\/\/|\/(?!\/))/.test(FACE.logo_url)) {
      var logo = el("img", "sw-logo"); logo.alt = ""; logo.src = new URL(FACE.logo_url, BASE).href;
      logo.onerror = function () { logo.remove(); a.textContent = (SHOP.charAt(0) || "?").toUpperCase(); };
      a.appendChild(logo); a.classList.add("sw-avatar--logo");
    }
    return a;
  }

  var reconnecting = tid(el("div", "sw-reconnecting", t("Reconnecting…")), "widget-reconnecting");
  reconnecting.setAttribute("role", "status"); reconnecting.hidden = true;

  var transcript = tid(el("div", "sw-transcript"), "widget-transcript");
  transcript.setAttribute("role", "log"); transcript.setAttribute("aria-live", "polite");
  transcript.setAttribute("aria-label", t("Conversation")); transcript.tabIndex = 0;
  var intro = el("p", "sw-intro", String(FACE.greeting || "").slice(0, 500) || (AGENT
    ? t("Hi! I'm {agent}. Ask me about an order, a delivery or a refund. A person from our team checks every refund before it's issued.", {agent: AGENT})
    : t("Hi! Ask me about an order, a delivery or a refund. A person from our team checks every refund before it's issued.")));
  var list = el("ol", "sw-messages");
  var suggestions = el("div", "sw-suggestions"); suggestions.setAttribute("aria-label", t("Suggestions")); suggestions.setAttribute("role", "group");
  ["Where is my order?", "My parcel never arrived", "An item arrived damaged"].forEach(function (text) {
    var chip = tid(el("button", "sw-suggestion", t(text)), "widget-suggestion"); chip.type = "button";
    chip.addEventListener("click", function () { input.value = t(text); submit(); });
    suggestions.appendChild(chip);
  });
  transcript.appendChild(intro); transcript.appendChild(suggestions); transcript.appendChild(list);
  var jump = tid(el("button", "sw-jump", t("New messages ↓")), "widget-jump"); jump.type = "button"; jump.hidden = true;

  var activity = tid(el("div", "sw-activity"), "widget-typing"); activity.hidden = true;
  var dots = el("span", "sw-dots"); dots.setAttribute("aria-hidden", "true");
  dots.appendChild(el("span")); dots.appendChild(el("span")); dots.appendChild(el("span"));
  var status = tid(el("span", "sw-status"), "widget-status"); status.setAttribute("role", "status");
  activity.appendChild(dots); activity.appendChild(el("span", "sw-visually-hidden", t("The assistant is working"))); activity.appendChild(status);

  function banner(id, cls) {
    var b = tid(el("div", "sw-banner " + cls), id); b.setAttribute("role", "status"); b.hidden = true;
    b.appendChild(el("span", "sw-banner-icon")); var t = el("div", "sw-banner-text");
    t.appendChild(el("strong")); t.appendChild(el("span")); b.appendChild(t);
    b.say = function (head, sub) { t.firstChild.textContent = words(head); t.lastChild.textContent = words(sub); };
    return b;
  }
  var approvalBanner = banner("widget-approval-banner", "sw-banner--approval");
  // What the banner says while a person reviews the agent's request, then what they decided, until the
  // assistant's answer (which says the details, a partly approved amount included) arrives.
  var APPROVAL_WORDS = {
    pending: ["Our team is reviewing your request", "A person checks this before anything is done. You'll see their decision here; you can keep writing."],
    approved: ["Our team has approved it", "The assistant is confirming the details here."],
    rejected: ["Our team has decided", "The assistant is explaining their decision here."],
    expired: ["It couldn't be reviewed in time", "Nothing has been done yet. A member of our team will follow up here."]
  };
  var handoverBanner = banner("widget-handover-banner", "sw-banner--handover");

  var composer = tid(el("form", "sw-composer"), "widget-composer");
  var label = el("label", "sw-visually-hidden", t("Your message")); label.htmlFor = "sw-input";
  var input = tid(el("textarea", "sw-input"), "widget-input");
  input.id = "sw-input"; input.rows = 1; input.placeholder = t("Write a message…");
  var send = tid(el("button", "sw-send"), "widget-send");
  send.type = "submit"; send.setAttribute("aria-label", t("Send message")); send.appendChild(svg(ICON_SEND));
  composer.appendChild(label); composer.appendChild(input); composer.appendChild(send);
  var error = tid(el("p", "sw-error"), "widget-error"); error.setAttribute("role", "alert"); error.hidden = true;

  // Until the desk goes live (no agent profile published on a shop's own desk) it says so and takes no
  // message; the desk refuses one anyway (503 being_set_up), so this is words, not the rule.
  var SETTING_UP = FACE.setting_up === true;
  var setupNotice = tid(el("div", "sw-setup"), "widget-setup"); setupNotice.setAttribute("role", "status");
  setupNotice.appendChild(el("strong", null, t("Support is being set up")));
  setupNotice.appendChild(el("p", null, t("We can't take messages here yet. Please come back a little later.")));
  setupNotice.hidden = !SETTING_UP; transcript.insertBefore(setupNotice, intro);
  if (SETTING_UP) { intro.remove(); suggestions.remove(); composer.hidden = subtitle.hidden = true; panel.dataset.connection = "setting_up"; }

  [header, reconnecting, transcript, jump, activity, approvalBanner, handoverBanner, composer, error]
    .forEach(function (n) { panel.appendChild(n); });
  root.appendChild(button); root.appendChild(panel);

  // -- transcript rendering --------------------------------------------------------------------------
  var seen = new Set();          // seqs on screen: a message.saved is shown exactly once
  var pending = [];              // the customer's messages not yet accepted: {client_id, text, node}
  var stream = null;             // the provisional bubble of the agent's streaming reply
  var streamBroken = false;      // deltas were lost while reconnecting: ignore them until the next reply
  var lastStaffName = null;

  // Follow the newest message unless the user scrolled up: only a scroll upwards unpins (a programmatic
  // smooth scroll only moves down, and content growing fires no scroll event).
  var pinned = true, lastTop = 0;
  function nearBottom() { return transcript.scrollHeight - transcript.scrollTop - transcript.clientHeight < 48; }
  function toBottom(smooth) {
    var reduced = window.matchMedia && matchMedia("(prefers-reduced-motion: reduce)").matches;
    transcript.scrollTo({top: transcript.scrollHeight, behavior: smooth && !reduced ? "smooth" : "auto"});
    pinned = true; jump.hidden = true;
  }
  function changed(smooth) { if (pinned) toBottom(smooth && !replaying); else jump.hidden = false; }
  transcript.addEventListener("scroll", function () {
    if (nearBottom()) { pinned = true; jump.hidden = true; } else if (transcript.scrollTop < lastTop - 2) pinned = false;
    lastTop = transcript.scrollTop;
  });
  jump.addEventListener("click", function () { toBottom(true); input.focus(); });

  function timeOf(iso) {
    var t = el("time", "sw-time"), d = iso ? new Date(iso) : new Date();
    t.dateTime = d.toISOString();
    t.textContent = d.toLocaleTimeString(LOCALE, {hour: "2-digit", minute: "2-digit"});
    t.title = d.toLocaleString(LOCALE, {dateStyle: "full", timeStyle: "short"});
    return t;
  }

  function messageNode(m) {
    var author = m.author || (m.role === "user" ? "customer" : "agent");
    if (author === "system") {
      var notice = tid(el("li", "sw-notice"), "widget-message");
      notice.dataset.author = "system"; notice.appendChild(el("span", "sw-notice-text", m.content));
      return notice;
    }
    var li = tid(el("li", "sw-msg sw-msg--" + author), "widget-message");
    li.dataset.author = author;
    if (author !== "customer") {
      var name = author === "staff" ? (m.staff_name || t("Support team")) + " · " + named("{shop} team", "Our team") : agentLabel();
      li.appendChild(el("span", "sw-name", name));
    }
    var bubble = el("div", "sw-bubble");
    if (author === "agent") { bubble.classList.add("sw-md"); bubble.appendChild(renderMarkdown(m.content)); }
    else bubble.textContent = m.content; // customer and staff text is plain text, line breaks kept by CSS
    li.appendChild(bubble);
    if (m.attachments && m.attachments.length) filesInto(li, bubble, m); // photos and PDFs above the words
    var meta = el("div", "sw-meta"); meta.appendChild(timeOf(m.created_at)); li.appendChild(meta);
    return li;
  }

  function place(node, seq) { // in seq order among saved messages; pending ones stay after them
    var after = null;
    for (var n = list.firstChild; n; n = n.nextSibling) {
      if (!n.dataset.seq || +n.dataset.seq > seq) { after = n; break; }
    }
    list.insertBefore(node, after);
    suggestions.hidden = true;
  }

  function same(a, b) { return a.normalize("NFC").trim() === String(b || "").normalize("NFC").trim(); }

  function onSaved(m) {
    gotSeq(m.seq);
    if (seen.has(m.seq)) return;
    seen.add(m.seq);
    if (m.author === "customer") dropUpload(m.client_id); // our own files, shown while they were on their way
    if (m.author === "customer") { // our own message may be on screen already, waiting for its accepted
      var own = pending.filter(function (p) { return same(p.text, m.content); })[0];
      if (own) { settle(own, m.seq); return changed(true); }
    }
    if (m.role === "assistant") { dropStream(); streamBroken = false; setLabel(null); }
    if (m.author === "staff" && m.staff_name) lastStaffName = m.staff_name;
    if (m.author === "customer" && state.closed && !replaying) { state.closed = false; renderState(); } // written again: reopened
    var node = messageNode(m); node.dataset.seq = m.seq; place(node, m.seq);
    if (!replaying && panel.hidden && m.author !== "customer") unread.hidden = false;
    changed(true);
  }

  function settle(p, seq) { // a pending message is now saved with this seq
    pending.splice(pending.indexOf(p), 1);
    p.node.dataset.seq = seq; delete p.node.dataset.state; delete p.node.dataset.clientId;
    p.node.querySelector(".sw-state").remove();
    seen.add(seq); gotSeq(seq);
    list.removeChild(p.node); place(p.node, seq);
  }

  function showStream(text) {
    if (!stream) {
      stream = tid(el("li", "sw-msg sw-msg--agent sw-streaming"), "widget-streaming");
      stream.dataset.author = "agent"; stream.setAttribute("aria-hidden", "true"); // the saved answer is announced
      stream.appendChild(el("span", "sw-name", agentLabel()));
      stream.appendChild(el("div", "sw-bubble sw-md")); stream.text = "";
      list.appendChild(stream);
    }
    stream.text += text;
    var bubble = stream.lastChild;
    bubble.textContent = "";
    bubble.appendChild(renderMarkdown(stream.text));
  }
  function dropStream() { if (stream) { stream.remove(); stream = null; } }

  // -- the agent's state: working, waiting on a specialist, handed to a person ------------------------
  var state = {run: null, awaiting: false, decided: null, conversation: "open", assignee: null, label: null, closed: false};
  var labelTimer = null;
  function setLabel(label) {
    clearTimeout(labelTimer);
    state.label = label;
    status.textContent = label ? t(label.replace(/[.…]+$/, "")) + "…" : "";
    status.hidden = !label;
    renderState();
  }
  function renderState() {
    var working = (state.run === "queued" || state.run === "running") && !state.awaiting;
    activity.hidden = !working || !!(stream && stream.text);
    var shown = state.awaiting ? "pending" : state.decided;
    approvalBanner.hidden = !shown;
    if (shown) { approvalBanner.dataset.state = shown; approvalBanner.say.apply(null, APPROVAL_WORDS[shown] || APPROVAL_WORDS.approved); }
    // A hand-over, a person joining and a hand-back are each told once, by a notice in the transcript; a
    // banner repeating it would be a second message (and "chatting with our team" before anyone joined, untrue).
    // Closed by our team: nobody is "here" any more, whoever had the conversation, until the customer writes again.
    var who = state.conversation === "taken_over" ? (state.assignee || lastStaffName) : null;
    handoverBanner.hidden = true;
    subtitle.textContent = state.closed ? t("This conversation is closed")
      : state.conversation === "taken_over" ? (who ? t("{name} from our team is here", {name: who}) : t("A member of our team is here"))
      : state.conversation === "needs_attention" ? t("Waiting for a member of our team") : t("Our assistant replies in seconds");
    panel.dataset.conversation = state.conversation;
    panel.dataset.run = state.run || "";
    panel.dataset.closed = String(state.closed);
    suggestions.hidden = list.children.length > 0;
    if (pinned) transcript.scrollTop = transcript.scrollHeight; // a banner took room from the transcript
  }
  function setRun(status) {
    state.run = status;
    if (status !== "awaiting_approval") state.awaiting = false; else { state.awaiting = true; state.decided = null; }
    if (status === "stopped") state.decided = null;
    if (status === "stopped" || status === "awaiting_approval") { dropStream(); streamBroken = false; setLabel(null); }
    renderState();
  }

  // -- the conversation and its socket ---------------------------------------------------------------
  var conv = null, starting = null, ws = null, ready = false, replaying = false;
  var attempt = 0, retryTimer = null, pingTimer = null, awaitingPong = false, pingSentAt = 0, expired = false, stateEpoch = 0;

  // -- gaps: the live path may lose an event (Redis restarted) or deliver two out of order (daphne and the
  // workers publish separately); the database has every message. Every seq up to `covered` is on screen or
  // not for the customer (message.hidden). A seq past a hole, or a pong naming a later last seq, asks for
  // a replay from `covered`, after a grace in which a merely late event can still arrive (docs/events.md).
  var GAP_GRACE_MS = 1500, IDLE_CHECK_MS = 4000, PING_EVERY_MS = 25000, PONG_WITHIN_MS = 10000;
  var covered = 0, ahead = new Set(), wanted = 0, gapTimer = null, idleTimer = null;
  function gotSeq(seq) {
    if (seq > covered) ahead.add(seq);
    while (ahead.delete(covered + 1)) covered++;
    expect(seq);
  }
  function expect(seq) {
    wanted = Math.max(wanted, seq);
    if (wanted > covered && !gapTimer) gapTimer = setTimeout(askAgain, GAP_GRACE_MS);
  }
  function askAgain() {
    gapTimer = null;
    if (wanted > covered && ready) ws.send(JSON.stringify({type: "resume", token: conv.token, last_seq: covered}));
  }
  function replayed(seq) { // replay.done: every seq up to `seq` is here now
    covered = Math.max(covered, seq);
    ahead.forEach(function (s) { if (s <= covered) ahead.delete(s); });
    while (ahead.delete(covered + 1)) covered++;
    clearTimeout(gapTimer); gapTimer = null; wanted = covered; // the database's word: nothing else is owed
  }
  function forgetSeqs() { covered = 0; ahead.clear(); wanted = 0; clearTimeout(gapTimer); gapTimer = null; }

  function api(path, options) {
    return fetch(BASE + "api/" + path, options).catch(function () {
      var e = new Error(t("We couldn't reach our support desk. Check your connection and try again."));
      e.unreachable = true; throw e; // the request may or may not have arrived: a retry says the same client_id
    }).then(function (r) {
      return r.json().catch(function () { return {}; }).then(function (body) {
        if (!r.ok) {
          var e = new Error(body.error || t("Something went wrong on our side. Please try again in a moment."));
          e.code = body.code; throw e;
        }
        return body;
      });
    });
  }

  // A conversation exists once the customer sends something: opening the panel shows the greeting and the
  // composer, and the first send creates the conversation and saves that message in one request (docs/widget.md).
  // Opening does reconnect to one that exists: stored on this device, or the e-mailed link's.
  function existingConversation() {
    if (conv) return Promise.resolve(conv);
    if (!identity) return Promise.reject(new Error("This page did not say who you are (data-customer-token)."));
    var stored = storage.get();
    if (stored && stored.id && stored.token) { conv = stored; conv.fromStorage = true; return Promise.resolve(conv); }
    if (!identity.link) return Promise.resolve(null);
    if (starting) return starting;
    starting = api("conversations/open", {method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify(withZone(identity))})
      .then(adopt).finally(function () { starting = null; });
    return starting;
  }
  function adopt(body) { // a conversation the desk answered with is the one on screen, and this device's
    conv = {id: body.conversation.id, token: body.token};
    storage.set({id: conv.id, token: conv.token});
    if (body.message) accepted(body.message);
    return conv;
  }
  function accepted(m) { // the first message, saved with its conversation: no longer pending
    var p = pending.filter(function (x) { return x.client_id === m.client_id; })[0];
    if (p && !seen.has(m.seq)) settle(p, m.seq);
  }
  /* POST /api/conversations: the sign-in, the browser's time zone and language, and `extra` (the first message,
   * a sign-in code). Files are the one first thing sent without it: their upload needs the conversation first. */
  function createConversation(extra) {
    var body = withZone(identity);
    body.language = LANG;
    Object.keys(extra || {}).forEach(function (k) { body[k] = extra[k]; });
    return api("conversations", {method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify(body)})
      .then(function (answer) { var c = adopt(answer); toldLanguage[c.id] = true; return c; }); // the language went with it
  }
  function ensureConversation() { // for an upload as the first thing sent
    return existingConversation().then(function (c) {
      if (c) return c;
      if (!starting) starting = createConversation({}).finally(function () { starting = null; });
      return starting;
    });
  }
  function firstMessage() {
    var p = pending[0];
    return p ? {message: {text: p.text, client_id: p.client_id}} : {};
  }

  function start() {
    if (SETTING_UP) return; // nothing to open or send until the desk goes live
    hideError();
    existingConversation().then(function (c) {
      if (c) return connect();
      panel.dataset.connection = "new"; // the greeting and the composer; nothing exists yet
      if (pending.length) begin();
    }, function (e) { showError(t("We couldn't start the chat. ") + e.message); });
  }

  var beginAttempt = 0, beginTimer = null;
  function begin() { // the customer's first send: the conversation and that message in one request
    if (conv) return connect();
    if (starting || codeForm || !pending.length) return;
    if (!identity) return showError(t("We couldn't start the chat. ") + "This page did not say who you are (data-customer-token).");
    clearTimeout(beginTimer); hideError();
    var p = pending[0];
    p.node.dataset.state = "sending"; p.node.querySelector(".sw-state").textContent = t("Sending…");
    starting = createConversation(firstMessage());
    starting.then(function () { starting = null; beginAttempt = 0; connect(); }, function (e) {
      starting = null;
      if (e.code === "code_required" && identity.email) { pendingLabels(); return askForCode(); }
      if (e.unreachable || e.code === "unavailable") { // perhaps saved, or busy for a moment: the same client_id again
        pendingLabels(); showError(e.message);
        beginTimer = setTimeout(begin, Math.min(10000, 1000 * Math.pow(2, beginAttempt++)));
        return;
      }
      // Refused (the sign-in, the words, a limit): nothing was saved, so every waiting message goes back in the box.
      pending.slice().reverse().forEach(function (x) {
        rejected({client_id: x.client_id, code: e.code, error: t("We couldn't start the chat. ") + e.message});
      });
    });
  }

  // Too many failed sign-ins with this e-mail: an order number alone no longer opens a chat. The widget asks
  // for a code to be e-mailed to the customer, and the chat opens with it.
  var codeForm = null;
  function askForCode() {
    if (codeForm) return;
    var post = function (body) {
      return api("conversations", {method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify(body)});
    };
    post({email: identity.email, send_code: true}).catch(function (e) { showError(e.message); }); // 429, 503: say so
    codeForm = tid(el("form", "sw-code"), "widget-code-form");
    var text = el("p", "sw-code-text", t("For your security, enter the 8-digit code we just e-mailed to {email}.", {email: identity.email}));
    var field = tid(el("input", "sw-code-input"), "widget-code-input");
    field.inputMode = "numeric"; field.autocomplete = "one-time-code"; field.maxLength = 8;
    field.setAttribute("aria-label", t("Code from the e-mail"));
    var go = tid(el("button", "sw-code-send", t("Continue")), "widget-code-send"); go.type = "submit";
    [text, field, go].forEach(function (n) { codeForm.appendChild(n); });
    codeForm.addEventListener("submit", function (ev) {
      ev.preventDefault(); hideError();
      var extra = firstMessage(); extra.code = field.value.replace(/\D/g, "");
      createConversation(extra).then(function () { // the message that asked for it goes with the code
        codeForm.remove(); codeForm = null; composer.hidden = false; connect();
      }, function (e) { showError(e.message); });
    });
    panel.insertBefore(codeForm, composer);
    composer.hidden = true; // nothing can be sent until the chat exists
    field.focus();
  }

  function connect() {
    if (!conv || (ws && ws.readyState <= 1)) return;
    tellLanguage();
    clearTimeout(retryTimer);
    var socket = ws = new WebSocket(WS_BASE + "ws/conversations/" + conv.id + "/");
    ready = false;
    panel.dataset.connection = attempt ? "reconnecting" : "connecting";
    socket.onopen = function () { socket.send(JSON.stringify({type: "resume", token: conv.token, last_seq: covered})); replaying = true; };
    socket.onmessage = function (e) { if (socket === ws) { try { handle(JSON.parse(e.data)); } catch (err) { console.error("support widget:", err); } } };
    socket.onclose = function (e) { if (socket === ws) closed(e.code); };
  }

  var REFUSED_FOR_GOOD = [4400, 4403, 4413, 4415];
  var retryAfter = 0; // seconds, from the error frame that came before a 4429 close
  function closed(code) {
    ws = null; ready = false; replaying = false; awaitingPong = false;
    clearInterval(pingTimer); clearTimeout(idleTimer); clearTimeout(gapTimer); gapTimer = null;
    if (stream) { dropStream(); streamBroken = true; } // deltas are not replayed: wait for the saved answer
    pendingLabels();
    if (code === 4401) return forget();
    if (REFUSED_FOR_GOOD.indexOf(code) >= 0) { // the same socket would be refused again: do not hammer
      reconnecting.hidden = true; panel.dataset.connection = "closed";
      return showError(t("The chat was disconnected. Reload the page to continue."));
    }
    reconnecting.hidden = false; panel.dataset.connection = "reconnecting";
    var delay = Math.min(10000, 500 * Math.pow(2, attempt++)) * (0.75 + Math.random() * 0.5);
    if (code === 4429) delay = Math.max(delay, (retryAfter || 30) * 1000); // too many sockets from here: wait
    retryAfter = 0;
    retryTimer = setTimeout(connect, delay);
  }

  function forget() { // 4401: the conversation token is bad or expired; the next open starts a new one
    var wasStored = conv && conv.fromStorage && !conv.resumed;
    storage.drop(); conv = null; attempt = 0;
    reconnecting.hidden = true; panel.dataset.connection = "closed";
    if (wasStored) return start(); // a stale stored conversation: start afresh right away
    expired = true;
    var notice = tid(el("li", "sw-notice sw-notice--local"), "widget-notice");
    notice.appendChild(el("span", "sw-notice-text", t("This chat has ended. Send a message to start a new one.")));
    list.appendChild(notice); toBottom(false);
  }

  function reset() { // a new conversation: clear the old one off the screen
    expired = false; list.textContent = ""; seen.clear(); forgetSeqs(); dropStream(); lastStaffName = null; clearRating();
    state = {run: null, awaiting: false, conversation: "open", assignee: null, label: null, closed: false}; setLabel(null); lastAnswerSeq = 0;
    stateSeq = 0;
  }

  // Events come from the site (a decision, the run it requeues) and from the worker (the run's replies):
  // a site's event can arrive after the worker's answer to it. Each carries the conversation's seq when it
  // was sent; one older than the agent's latest answer describes a state the conversation has left.
  var lastAnswerSeq = 0;
  var stoppedRuns = {}; // run id -> true once its "stopped" came
  function stale(ev) { return typeof ev.seq === "number" && ev.seq < lastAnswerSeq; }
  // The conversation's seq when the status shown was true: an update sent before it (published just before this
  // socket joined, and delivered just after its state was read) would show a closed conversation open again.
  var stateSeq = 0;

  function handle(ev) {
    fitEvent(ev); // typing, the rating (below)
    if (ev.type !== "pong") { clearTimeout(idleTimer); idleTimer = setTimeout(sendPing, IDLE_CHECK_MS); } // quiet: check for a lost last event
    switch (ev.type) {
      case "message.saved":
        if (ev.message && ev.message.role === "assistant" && ev.message.content) {
          lastAnswerSeq = Math.max(lastAnswerSeq, ev.message.seq || 0);
          if (state.decided) { state.decided = null; renderState(); }
        }
        return onSaved(ev.message);
      case "message.hidden": return gotSeq(ev.seq);
      case "replay.done":
        replayed(ev.seq || 0);
        refreshState(); // events besides messages may have been lost with the ones just replayed
        if (ready) return; // a replay asked for to fill a gap: the socket was live already
        ready = true; replaying = false; attempt = 0; conv.resumed = true;
        reconnecting.hidden = true; panel.dataset.connection = "open";
        clearInterval(pingTimer); pingTimer = setInterval(ping, PING_EVERY_MS);
        flush();
        if (pinned) toBottom(false);
        return;
      case "message.accepted": {
        var p = pending.filter(function (x) { return x.client_id === ev.client_id; })[0];
        if (!p) return;
        if (seen.has(ev.seq)) { pending.splice(pending.indexOf(p), 1); p.node.remove(); return; }
        return settle(p, ev.seq);
      }
      case "message.rejected": return rejected(ev);
      case "token.delta":
        if (ev.text === "") { streamBroken = false; if (stream) { stream.text = ""; stream.lastChild.textContent = ""; } }
        else if (!streamBroken) { showStream(ev.text); changed(false); }
        return renderState();
      case "step.started":
        // A model call begins a new reply: a partial one still shown (its worker died mid-stream, and the
        // resumed run streams the reply again from the start) is dropped, and the deltas are whole again.
        if (ev.kind === "model") { dropStream(); streamBroken = false; }
        return setLabel(ev.label || null);
      case "step.finished": clearTimeout(labelTimer); labelTimer = setTimeout(function () { setLabel(null); }, 250); return;
      case "run.status":
        if (stale(ev) && ev.status !== "stopped") return; // the run has answered since: old news
        // A run never leaves "stopped"; a "queued" sent by the web process may arrive after the worker's end.
        if (ev.run && stoppedRuns[ev.run] && ev.status !== "stopped") return;
        if (ev.run && ev.status === "stopped") stoppedRuns[ev.run] = true;
        stateEpoch++; return setRun(ev.status);
      case "approval.requested": stateEpoch++; state.awaiting = true; state.decided = null; return renderState();
      case "approval.decided":
        if (stale(ev)) return; // the agent has answered since the decision: nothing left to confirm
        stateEpoch++; state.awaiting = ev.pending_approvals > 0;
        if (!state.awaiting) state.decided = ev.status || null;
        return renderState();
      case "conversation.closed": // the closing line came first (its message.saved); then the rating is offered
        if (typeof ev.seq === "number") stateSeq = Math.max(stateSeq, ev.seq);
        stateEpoch++; state.closed = true; renderState(); return offerRating();
      case "conversation.updated":
      case "conversation.assigned":
        if (typeof ev.seq === "number" && ev.seq < stateSeq) return; // older than the status shown
        if (typeof ev.seq === "number") stateSeq = ev.seq;
        stateEpoch++; state.conversation = ev.status || (ev.detail && ev.detail.status) || state.conversation;
        if (ev.detail && typeof ev.detail.closed === "boolean") state.closed = ev.detail.closed;
        if (ev.type === "conversation.assigned") state.assignee = ev.assignee || null;
        return renderState();
      case "error": if (typeof ev.retry_after === "number") retryAfter = ev.retry_after; return;
      case "pong": awaitingPong = false; if (typeof ev.seq === "number") expect(ev.seq); return;
    }
  }

  function ping() { // every PING_EVERY_MS: a socket that stopped answering is closed and reconnected
    if (!ws || ws.readyState !== 1) return;
    if (awaitingPong && Date.now() - pingSentAt > PONG_WITHIN_MS) { awaitingPong = false; return ws.close(); }
    sendPing();
  }
  function sendPing() { // the pong names the conversation's last seq: a lost last event shows as a gap
    if (!ready || awaitingPong) return;
    awaitingPong = true; pingSentAt = Date.now(); ws.send(JSON.stringify({type: "ping"}));
  }

  // Only messages are replayed after resume; the run's and the conversation's state are read over HTTP.
  function refreshState() {
    var epoch = stateEpoch, c = conv;
    api("conversations/" + c.id, {headers: {Authorization: "Bearer " + c.token}}).then(function (body) {
      // A run that stopped before this socket opened sent its "stopped" to nobody here: remember it all the same
      // (a run never leaves "stopped"), so a "queued" of that run arriving late does not show it working again.
      if (c === conv && body.run && body.run.status === "stopped" && body.run.id) stoppedRuns[body.run.id] = true;
      if (epoch !== stateEpoch || c !== conv) return; // a live event was newer
      if (typeof body.conversation.last_seq === "number") stateSeq = Math.max(stateSeq, body.conversation.last_seq);
      state.conversation = body.conversation.status;
      state.closed = !!body.conversation.closed;
      state.run = body.run ? body.run.status : null;
      state.awaiting = !!body.awaiting_approval;
      renderState();
    }, function () { /* the live events still arrive */ });
  }

  // -- sending -----------------------------------------------------------------------------------------
  function clientId() {
    return (crypto.randomUUID ? crypto.randomUUID() : Date.now().toString(36) + Math.random().toString(36).slice(2)).replace(/-/g, "");
  }
  function submit() {
    var text = input.value;
    if (outgoing.length) return sendFiles(); // photos or PDFs, with these words or none
    if (!text.trim()) return;
    if (expired) reset();
    hideError();
    if (state.closed) { state.closed = false; renderState(); } // writing again reopens the conversation
    var p = {client_id: clientId(), text: text};
    p.node = tid(el("li", "sw-msg sw-msg--customer"), "widget-message");
    p.node.dataset.author = "customer"; p.node.dataset.clientId = p.client_id;
    p.node.appendChild(el("div", "sw-bubble", text));
    var meta = el("div", "sw-meta"); meta.appendChild(timeOf(null)); meta.appendChild(el("span", "sw-state"));
    p.node.appendChild(meta);
    list.insertBefore(p.node, stream); // before the agent's streaming reply, if any
    suggestions.hidden = true;
    pending.push(p);
    input.value = ""; grow();
    toBottom(true);
    if (ready) transmit(p); else { pendingLabels(); if (!conv) begin(); }
  }
  function transmit(p) {
    p.node.dataset.state = "sending"; p.node.querySelector(".sw-state").textContent = t("Sending…");
    ws.send(JSON.stringify({type: "message", text: p.text, client_id: p.client_id}));
  }
  function flush() { pending.slice().forEach(transmit); } // the same client_id again: saved once
  function pendingLabels() {
    pending.forEach(function (p) { p.node.dataset.state = "queued"; p.node.querySelector(".sw-state").textContent = t("Waiting for connection…"); });
  }
  function rejected(ev) {
    var p = pending.filter(function (x) { return x.client_id === ev.client_id; })[0];
    if (p) {
      pending.splice(pending.indexOf(p), 1); p.node.remove();
      input.value = input.value.trim() ? p.text + "\n" + input.value : p.text; grow();
    }
    showError(refusal(ev.code, ev.error || t("Your message could not be sent."), refusalValues(ev)));
    input.focus();
  }
  function showError(text) { error.textContent = text; error.hidden = false; }
  function hideError() { error.hidden = true; error.textContent = ""; }
  function grow() { input.style.height = "auto"; input.style.height = Math.min(input.scrollHeight, 140) + "px"; }

  composer.addEventListener("submit", function (e) { e.preventDefault(); submit(); });
  input.addEventListener("keydown", function (e) {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) { e.preventDefault(); submit(); }
  });
  input.addEventListener("input", grow);

  // -- attachments: photos and PDFs the customer sends (support/customers/attachments.py) ------------------------
  // Chosen files wait in a tray above the composer (with a preview) until the customer sends; then one
  // multipart POST carries them and the words, with a client_id so a retried send is saved once. The
  // server checks each file by its content and says in plain words what it refuses. Files are shown through
  // signed links that expire: a link that has, is fetched again from the conversation's file list.
  // The widget's catalogue, when it has one (say() is its t(), or the English words as they are).
  function say(text, values) {
    if (typeof t === "function") return t(text, values);
    return values ? text.replace(/\{(\w+)\}/g, function (m, k) { return k in values ? String(values[k]) : m; }) : text;
  }
  if (typeof CATALOG !== "undefined") Object.assign(CATALOG.de || (CATALOG.de = {}), {
    "Attach a photo or PDF": "Foto oder PDF anhängen", "Files to send": "Dateien zum Senden",
    "Remove {name}": "{name} entfernen", "Sending…": "Wird gesendet…", "Drop photos or PDFs here": "Fotos oder PDFs hier ablegen",
    "Photo {name}, {size}: open it full size": "Foto {name}, {size}: in voller Größe öffnen",
    "PDF {name}, {size}: download it": "PDF {name}, {size}: herunterladen", "Download": "Herunterladen",
    "You can send up to {n} files in one message.": "Sie können bis zu {n} Dateien in einer Nachricht senden.",
    "“{name}” isn't a photo or a PDF. Please choose a JPEG, PNG, WebP or HEIC photo, or a PDF.":
      "„{name}“ ist kein Foto und kein PDF. Bitte wählen Sie ein JPEG-, PNG-, WebP- oder HEIC-Foto oder ein PDF.",
    "“{name}” is {size}; each file can be up to {limit}.": "„{name}“ ist {size} groß; jede Datei darf bis zu {limit} groß sein.",
    "error:attachment_type": "Diese Datei ist kein Foto und kein PDF, das wir lesen können. Bitte senden Sie ein JPEG-, PNG-, WebP- oder HEIC-Foto oder ein PDF.",
    "error:attachment_unreadable": "Diese Datei konnte nicht gelesen werden; sie scheint beschädigt oder unvollständig zu sein.",
    "error:attachment_too_large": "Diese Datei ist zu groß. Bitte senden Sie ein kleineres Foto oder PDF.",
    "error:too_many_attachments": "Zu viele Dateien für eine Nachricht. Bitte senden Sie den Rest in einer weiteren Nachricht.",
    "error:attachments_full": "In diesem Gespräch ist kein Platz für weitere Dateien.",
    "error:busy": "Wir verarbeiten gerade viele Fotos. Bitte senden Sie Ihre Datei in ein paar Sekunden noch einmal.",
    "error:unavailable": "Das Senden von Dateien ist gerade kurz nicht möglich. Bitte versuchen Sie es in ein paar Sekunden noch einmal."
  });
  var ICON_CLIP = "M16.5 6.5v10a4.5 4.5 0 0 1-9 0V5.8a3 3 0 0 1 6 0v9.7a1.5 1.5 0 0 1-3 0V6.5H9v9a3 3 0 0 0 6 0V5.8a4.5 4.5 0 0 0-9 0v10.7a6 6 0 0 0 12 0v-10z";
  var FILE_LIMITS = {max_file_bytes: 10 * 1024 * 1024, per_message: 4}; // the defaults; the server's own replace them
  var ACCEPT = "image/jpeg,image/png,image/webp,image/heic,image/heif,.heic,.heif,application/pdf,.pdf";
  var outgoing = [];     // in the tray: {file, node}
  var uploading = {};  // client_id -> the bubble shown while its files are on their way

  var fileInput = tid(el("input", "sw-file-input"), "widget-file-input");
  fileInput.type = "file"; fileInput.multiple = true; fileInput.accept = ACCEPT; fileInput.hidden = true; fileInput.tabIndex = -1;
  var attachBtn = tid(el("button", "sw-attach"), "widget-attach");
  attachBtn.type = "button"; attachBtn.setAttribute("aria-label", say("Attach a photo or PDF")); attachBtn.title = say("Attach a photo or PDF");
  attachBtn.appendChild(svg(ICON_CLIP));
  composer.insertBefore(attachBtn, input); composer.appendChild(fileInput);
  var tray = tid(el("ul", "sw-tray"), "widget-tray"); tray.hidden = true; tray.setAttribute("aria-label", say("Files to send"));
  panel.insertBefore(tray, composer);
  var dropHint = el("div", "sw-drop", say("Drop photos or PDFs here")); dropHint.hidden = true; panel.appendChild(dropHint);

  attachBtn.addEventListener("click", function () { fileLimits(); fileInput.click(); });
  fileInput.addEventListener("change", function () { addFiles(fileInput.files); fileInput.value = ""; });
  var dragDepth = 0;
  function dragsFiles(e) { return e.dataTransfer && Array.prototype.indexOf.call(e.dataTransfer.types || [], "Files") >= 0; }
  panel.addEventListener("dragenter", function (e) { if (dragsFiles(e)) { dragDepth++; dropHint.hidden = false; e.preventDefault(); } });
  panel.addEventListener("dragover", function (e) { if (dragsFiles(e)) e.preventDefault(); });
  panel.addEventListener("dragleave", function (e) { if (dragsFiles(e) && --dragDepth <= 0) { dragDepth = 0; dropHint.hidden = true; } });
  panel.addEventListener("drop", function (e) {
    if (!dragsFiles(e)) return;
    e.preventDefault(); dragDepth = 0; dropHint.hidden = true; addFiles(e.dataTransfer.files);
  });
  input.addEventListener("paste", function (e) { // a screenshot pasted into the message box
    var files = e.clipboardData && e.clipboardData.files;
    if (files && files.length) { e.preventDefault(); addFiles(files); }
  });

  function deskUrl(path) { return new URL(path, BASE).href; }
  function sizeText(bytes) {
    return bytes >= 1e6 ? (bytes / 1e6).toFixed(1) + " MB" : bytes >= 1e3 ? Math.round(bytes / 1e3) + " KB" : bytes + " bytes";
  }
  function isPdf(file) { return file.type === "application/pdf" || /\.pdf$/i.test(file.name); }
  function acceptable(file) {
    return /^image\/(jpeg|png|webp|heic|heif)$/.test(file.type) || isPdf(file) || /\.(jpe?g|png|webp|heic|heif)$/i.test(file.name);
  }
  function fileLimits() { // what this desk takes, read once a conversation exists
    if (!conv || fileLimits.read) return;
    fileLimits.read = true;
    api("conversations/" + conv.id + "/attachments", {headers: {Authorization: "Bearer " + conv.token}})
      .then(function (body) { if (body.limits) FILE_LIMITS = body.limits; }, function () { fileLimits.read = false; });
  }

  function addFiles(files) {
    hideError();
    Array.prototype.forEach.call(files || [], function (file) {
      if (outgoing.length >= FILE_LIMITS.per_message) return showError(say("You can send up to {n} files in one message.", {n: FILE_LIMITS.per_message}));
      if (!acceptable(file)) return showError(say("“{name}” isn't a photo or a PDF. Please choose a JPEG, PNG, WebP or HEIC photo, or a PDF.", {name: file.name}));
      if (file.size > FILE_LIMITS.max_file_bytes) {
        return showError(say("“{name}” is {size}; each file can be up to {limit}.",
          {name: file.name, size: sizeText(file.size), limit: Math.round(FILE_LIMITS.max_file_bytes / 1048576) + " MB"}));
      }
      var item = {file: file};
      item.node = fileChip(item); tray.appendChild(item.node); outgoing.push(item);
    });
    tray.hidden = !outgoing.length;
    if (outgoing.length) input.focus();
  }
  function fileChip(item) {
    var li = tid(el("li", "sw-chip"), "widget-chip"), file = item.file;
    li.appendChild(preview(file, "sw-chip-thumb"));
    var words = el("span", "sw-chip-words");
    words.appendChild(el("span", "sw-chip-name", file.name)); words.appendChild(el("span", "sw-chip-size", sizeText(file.size)));
    li.appendChild(words);
    var remove = tid(el("button", "sw-chip-remove"), "widget-chip-remove");
    remove.type = "button"; remove.setAttribute("aria-label", say("Remove {name}", {name: file.name})); remove.appendChild(svg(ICON_CLOSE));
    remove.addEventListener("click", function () {
      outgoing.splice(outgoing.indexOf(item), 1); li.remove(); tray.hidden = !outgoing.length; input.focus();
    });
    li.appendChild(remove);
    return li;
  }
  /* A small preview drawn on a canvas (a data: URL, which the shop page's policy allows; a blob: URL may
   * not be); a PDF, or a photo this browser cannot draw (HEIC), gets a labelled tile instead. */
  function preview(file, cls) {
    var box = el("span", cls);
    if (isPdf(file) || !window.createImageBitmap) { box.appendChild(el("span", "sw-file-badge" + (isPdf(file) ? " sw-file-badge--pdf" : ""), isPdf(file) ? "PDF" : "IMG")); return box; }
    createImageBitmap(file).then(function (bitmap) {
      var scale = Math.min(1, 192 / Math.max(bitmap.width, bitmap.height)), canvas = document.createElement("canvas");
      canvas.width = Math.round(bitmap.width * scale); canvas.height = Math.round(bitmap.height * scale);
      canvas.getContext("2d").drawImage(bitmap, 0, 0, canvas.width, canvas.height);
      var img = el("img"); img.alt = ""; img.src = canvas.toDataURL("image/jpeg", 0.8); box.appendChild(img);
    }, function () { box.appendChild(el("span", "sw-file-badge", "IMG")); });
    return box;
  }

  function sendFiles() {
    var text = input.value, items = outgoing.splice(0), id = clientId();
    if (expired) reset();
    hideError(); tray.textContent = ""; tray.hidden = true;
    var node = tid(el("li", "sw-msg sw-msg--customer"), "widget-message");
    node.dataset.author = "customer"; node.dataset.state = "sending"; node.dataset.clientId = id;
    var grid = el("div", "sw-files");
    items.forEach(function (item) { grid.appendChild(preview(item.file, "sw-file sw-file--local")); });
    node.appendChild(grid);
    if (text.trim()) node.appendChild(el("div", "sw-bubble", text));
    var meta = el("div", "sw-meta"); meta.appendChild(timeOf(null)); meta.appendChild(el("span", "sw-state", say("Sending…")));
    node.appendChild(meta);
    list.insertBefore(node, stream); suggestions.hidden = true;
    uploading[id] = node;
    input.value = ""; grow(); toBottom(true);
    ensureConversation().then(function (c) {
      var form = new FormData();
      items.forEach(function (item) { form.append("file", item.file, item.file.name); });
      if (text.trim()) form.append("text", text);
      form.append("client_id", id);
      return api("conversations/" + c.id + "/attachments", {method: "POST", headers: {Authorization: "Bearer " + c.token}, body: form});
    }).then(function (body) {
      if (!ws) connect();
      onSaved(body.message); // the socket's copy of it, before or after, is the same seq: shown once
      dropUpload(id);
    }, function (e) { // nothing was saved: the files go back in the tray and the words in the box
      dropUpload(id);
      if (conv && !ws) connect(); // created for these files: the next send goes to it
      items.forEach(function (item) { item.node = fileChip(item); tray.appendChild(item.node); outgoing.push(item); });
      tray.hidden = !outgoing.length;
      if (!input.value.trim()) { input.value = text; grow(); }
      showError(typeof refusal === "function" ? refusal(e.code, e.message) : e.message);
    });
  }
  function dropUpload(id) { if (id && uploading[id]) { uploading[id].remove(); delete uploading[id]; } }

  /* A customer message's files: thumbnails that open the full photo, a tile that downloads a PDF (the desk
   * serves PDFs as downloads, never shown on its own origin). The words under them are left out when they
   * are only the desk's "[Sent a photo]". */
  function filesInto(li, bubble, m) {
    var grid = tid(el("div", "sw-files"), "widget-files");
    m.attachments.forEach(function (a) {
      var link = tid(el("a", "sw-file sw-file--" + a.kind), "widget-file");
      link.target = "_blank"; link.rel = "noopener noreferrer"; link.referrerPolicy = "no-referrer";
      link.dataset.id = a.id; link.dataset.ref = a.ref;
      link.setAttribute("aria-label", say(a.kind === "image" ? "Photo {name}, {size}: open it full size" : "PDF {name}, {size}: download it",
        {name: a.name, size: a.size_text}));
      if (a.kind === "pdf") link.download = a.name; // honoured where the widget runs on the desk's own origin
      if (a.thumbnail_url) {
        var img = el("img", "sw-file-thumb"); img.alt = ""; img.referrerPolicy = "no-referrer";
        if (a.width && a.height) { img.width = a.width; img.height = a.height; }
        img.addEventListener("error", function () { refreshFiles(); });
        link.appendChild(img);
      } else {
        link.appendChild(el("span", "sw-file-badge sw-file-badge--pdf", "PDF"));
        var words = el("span", "sw-file-words");
        words.appendChild(el("span", "sw-file-name", a.name));
        words.appendChild(el("span", "sw-file-size", a.size_text + " · " + say("Download")));
        link.appendChild(words);
      }
      setLinks(link, a);
      link.addEventListener("click", function (e) { // a link past its time is fetched again first
        if (Date.now() < link.expires - 30000) return;
        e.preventDefault();
        refreshFiles().then(function () { window.open(link.href, "_blank", "noopener"); });
      });
      grid.appendChild(link);
    });
    li.insertBefore(grid, bubble);
    if (m.attachments_only) bubble.remove();
  }
  function setLinks(link, a) {
    link.href = deskUrl(a.url); link.expires = Date.parse(a.expires_at) || 0;
    var img = link.querySelector("img");
    if (img && a.thumbnail_url) img.src = deskUrl(a.thumbnail_url);
  }
  var refreshing = null, refreshedAt = 0;
  function refreshFiles() {
    if (refreshing) return refreshing;
    if (!conv || Date.now() - refreshedAt < 10000) return Promise.resolve();
    refreshedAt = Date.now();
    refreshing = api("conversations/" + conv.id + "/attachments", {headers: {Authorization: "Bearer " + conv.token}})
      .then(function (body) {
        (body.attachments || []).forEach(function (a) {
          list.querySelectorAll('.sw-file[data-id="' + a.id + '"]').forEach(function (link) { setLinks(link, a); });
        });
      }, function () {}).finally(function () { refreshing = null; });
    return refreshing;
  }

  // -- open and close --------------------------------------------------------------------------------
  function open() {
    panel.hidden = false; root.classList.add("sw-open");
    fitOpen(); // docked beside the page, or the phone's sheet
    button.setAttribute("aria-expanded", "true"); button.setAttribute("aria-label", named("Close {shop} support chat", "Close the support chat"));
    unread.hidden = true;
    if (expired) reset();
    if (!conv || !ws) start();
    toBottom(false);
    input.focus();
  }
  function close() {
    panel.hidden = true; root.classList.remove("sw-open");
    fitClose();
    button.setAttribute("aria-expanded", "false"); button.removeAttribute("aria-label"); // its visible label again
    button.focus();
  }
  button.addEventListener("click", function () { if (panel.hidden) open(); else close(); });
  closeBtn.addEventListener("click", close);
  var phone = window.matchMedia("(max-width: 639px)"); // the sheet: PHONE_MAX
  root.addEventListener("keydown", function (e) {
    if (e.key === "Escape" && !panel.hidden) { e.stopPropagation(); close(); }
    // Full-screen on a phone the panel is modal: Tab cycles inside it.
    if (e.key === "Tab" && !panel.hidden && phone.matches) {
      var edge = e.shiftKey ? closeBtn : send;
      if (shadow.activeElement === edge) { e.preventDefault(); (e.shiftKey ? send : closeBtn).focus(); }
    }
  });
  window.addEventListener("online", function () {
    if (conv && !ws) { attempt = 0; connect(); } else if (!conv && pending.length) { beginAttempt = 0; begin(); }
  });

  // -- fitting the shop: colours, side, docking, the phone's sheet, hours, a person typing, the rating ----
  function words(text, values) { return t(text, values); } // for code whose own `t` is a DOM node
  function refusalValues(ev) {
    var number = /\d[\d,.]*/.exec(ev.error || "");
    return {limit: number ? Number(number[0].replace(/\D/g, "")).toLocaleString(LANG) : "",
      seconds: ev.retry_after != null ? ev.retry_after : ""};
  }
  root.setAttribute("lang", LANG);
  if (FIT.position === "left") root.classList.add("sw-left");
  (function colours() {
    if (FIT.accent) { host.style.setProperty("--sw-accent", FIT.accent); host.style.setProperty("--sw-accent-dark", shade(FIT.accent, 0.8)); }
    // Text on the accent: the shop's, else whichever of white and ink reads better on it.
    var on = FIT.accentText || (FIT.accent ? (contrast(FIT.accent, "#ffffff") >= contrast(FIT.accent, "#1d2330") ? "#ffffff" : "#1d2330") : null);
    if (on) host.style.setProperty("--sw-on-accent", on);
    if (FIT.accent) { // the accent as text on white (chips, the avatar's letter): darkened until it reads
      var ink = FIT.accent;
      for (var i = 0; i < 20 && contrast(ink, "#ffffff") < 4.5; i++) ink = shade(ink, 0.9);
      host.style.setProperty("--sw-accent-ink", ink);
    }
  })();
  function rgb(hex) {
    var h = hex.slice(1); if (h.length === 3) h = h.replace(/./g, "$&$&");
    return [0, 2, 4].map(function (i) { return parseInt(h.slice(i, i + 2), 16); });
  }
  function shade(hex, f) { return "#" + rgb(hex).map(function (c) { return ("0" + Math.round(c * f).toString(16)).slice(-2); }).join(""); }
  function luminance(hex) {
    var c = rgb(hex).map(function (v) { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); });
    return 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2];
  }
  function contrast(a, b) { var x = luminance(a), y = luminance(b); return (Math.max(x, y) + 0.05) / (Math.min(x, y) + 0.05); }

  // On a phone the close button reads "Back to shop" (the sheet covers the shop); Escape and the browser's
  // back button close the sheet too (one history entry while it is open).
  closeBtn.firstChild.classList.add("sw-close-x");
  closeBtn.appendChild(svg("M15.4 5 8.4 12l7 7 1.4-1.4-5.6-5.6 5.6-5.6z")).classList.add("sw-close-back");
  closeBtn.appendChild(el("span", "sw-close-label", t("Back to shop")));
  var wide = window.matchMedia("(min-width: " + DOCK_MIN + "px)");
  var sheet = window.matchMedia("(max-width: " + PHONE_MAX + "px)");
  var pushed = false, pageMargin = null;
  function fitLabels() { closeBtn.setAttribute("aria-label", sheet.matches ? t("Back to shop") : t("Close chat")); }
  /* Docked (>= 1024 px, data-layout="dock"): the open panel is a full-height side panel and the page gives it
   * room (a margin on the page's root element), so nothing of the shop is under it. */
  function dock() {
    var docked = !panel.hidden && FIT.layout === "dock" && wide.matches && !root.classList.contains("sw-root--page");
    root.classList.toggle("sw-docked", docked);
    var side = "margin-" + FIT.position, page = document.documentElement.style;
    if (docked && pageMargin === null) { pageMargin = page.getPropertyValue(side); page.setProperty(side, DOCK_WIDTH + "px"); }
    if (!docked && pageMargin !== null) { if (pageMargin) page.setProperty(side, pageMargin); else page.removeProperty(side); pageMargin = null; }
  }
  function fitOpen() {
    dock(); fitLabels(); showHours();
    panel.setAttribute("aria-modal", sheet.matches ? "true" : "false");
    if (sheet.matches && !pushed && !root.classList.contains("sw-root--page")) {
      try { history.pushState({sundryWidget: true}, ""); pushed = true; } catch (e) { /* sandboxed page */ }
    }
  }
  function fitClose() {
    dock();
    if (pushed) { pushed = false; if (history.state && history.state.sundryWidget) history.back(); }
  }
  window.addEventListener("popstate", function () { if (pushed) { pushed = false; if (!panel.hidden) close(); } });
  [wide, sheet].forEach(function (q) { (q.addEventListener ? q.addEventListener.bind(q, "change") : q.addListener.bind(q))(function () { dock(); fitLabels(); }); });
  fitLabels();

  // Expected reply time and business hours (data-reply-time, data-hours, data-hours-zone): shown under the
  // header whenever the panel opens.
  var hoursBar = tid(el("div", "sw-hours"), "widget-hours"); hoursBar.hidden = true;
  var hoursNow = el("p", "sw-hours-now"), hoursList = el("p", "sw-hours-list");
  hoursBar.appendChild(hoursNow); hoursBar.appendChild(hoursList);
  panel.insertBefore(hoursBar, header.nextSibling);
  function zoneParts(date) {
    var parts = {};
    new Intl.DateTimeFormat("en-US", {timeZone: FIT.zone || undefined, weekday: "short", hour: "2-digit", minute: "2-digit", hourCycle: "h23"})
      .formatToParts(date).forEach(function (p) { parts[p.type] = p.value; });
    return {day: DAYS.indexOf(parts.weekday), minutes: (+parts.hour % 24) * 60 + +parts.minute};
  }
  function openAt(date) {
    var p = zoneParts(date);
    return FIT.hours.some(function (r) { return r.days.indexOf(p.day) >= 0 && p.minutes >= r.from && p.minutes < r.to; });
  }
  function nextOpening(now) { // hours open on quarter hours in every time zone there is
    var step = 15 * 60000, start = Math.ceil(now / step) * step;
    for (var i = 0; i < 8 * 96; i++) { var d = new Date(start + i * step); if (openAt(d)) return d; }
    return null;
  }
  function replyWithin() {
    if (!FIT.replyTime) return "";
    var n = parseInt(FIT.replyTime, 10), unit = FIT.replyTime.slice(-1);
    var time = unit === "m" ? t("{n} minutes", {n: n}) : unit === "h" ? (n === 1 ? t("1 hour") : t("{n} hours", {n: n}))
      : (n === 1 ? t("1 day") : t("{n} days", {n: n}));
    return t("replies within {time}", {time: time});
  }
  function teamState() { // {open, back: Date|null, text}
    if (!FIT.hours) return {open: true, text: replyWithin()};
    var now = new Date(), isOpen = openAt(now);
    if (isOpen) return {open: true, text: [t("Our team is here now"), replyWithin()].filter(Boolean).join(" · ")};
    var back = nextOpening(now.getTime());
    var when = back ? back.toLocaleString(LOCALE, {weekday: "short", hour: "2-digit", minute: "2-digit", hourCycle: "h23"}) : "";
    return {open: false, back: back, text: t("Our team is away") + (when ? " · " + t("back {when}", {when: when}) : "")};
  }
  /* {days: [1..5], from: 540, to: 1050} -> "Mon–Fri 09:00–17:30" in the widget's language ("Mo.–Fr." in German). */
  function dayName(d) { // 7 Jan 2024 was a Sunday
    return new Intl.DateTimeFormat(LOCALE, {weekday: "short", timeZone: "UTC"}).format(new Date(Date.UTC(2024, 0, 7 + d)));
  }
  function clock(minutes) { return ("0" + Math.floor(minutes / 60)).slice(-2) + ":" + ("0" + minutes % 60).slice(-2); }
  function hoursText(r) {
    var days = r.days.length > 1 ? dayName(r.days[0]) + "–" + dayName(r.days[r.days.length - 1]) : dayName(r.days[0]);
    return days + " " + clock(r.from) + "–" + clock(r.to);
  }
  function showHours() {
    if (!FIT.hours && !FIT.replyTime) return;
    var s = teamState();
    hoursBar.hidden = false; hoursBar.dataset.open = String(s.open);
    hoursNow.textContent = s.text;
    hoursList.hidden = !FIT.hours;
    if (FIT.hours) {
      var zone = FIT.zone ? t("{city} time", {city: FIT.zone.split("/").pop().replace(/_/g, " ")}) : t("your time");
      hoursList.textContent = t("Hours: {hours} ({zone})", {hours: FIT.hours.map(hoursText).join(", "), zone: zone});
    }
  }

  // "Sam is typing…": a person writing in the console (staff.typing), shown for a few seconds after the last.
  var typingNote = tid(el("div", "sw-typing"), "widget-staff-typing"); typingNote.hidden = true;
  typingNote.setAttribute("role", "status");
  var typingDots = el("span", "sw-dots"); typingDots.setAttribute("aria-hidden", "true");
  [0, 1, 2].forEach(function () { typingDots.appendChild(el("span")); });
  var typingText = el("span", "sw-typing-text");
  typingNote.appendChild(typingDots); typingNote.appendChild(typingText);
  panel.insertBefore(typingNote, activity);
  var typingTimer = null, TYPING_SHOWN_MS = 6000;
  function showTyping(name) {
    typingText.textContent = name ? t("{name} is typing…", {name: String(name).slice(0, 60)}) : t("Our team is typing…");
    typingNote.hidden = false; clearTimeout(typingTimer); typingTimer = setTimeout(stopTyping, TYPING_SHOWN_MS);
    if (pinned) transcript.scrollTop = transcript.scrollHeight;
  }
  function stopTyping() { clearTimeout(typingTimer); typingNote.hidden = true; }

  // The rating: offered once the question is resolved or our team closed the conversation; 1 to 5 and a comment,
  // changeable. The desk decides whether it is offered (GET .../rating), the widget only asks.
  var rating = tid(el("section", "sw-rating"), "widget-rating"); rating.hidden = true;
  rating.setAttribute("aria-label", t("Rate this conversation"));
  var ratingForm = el("div", "sw-rating-form"), ratingDone = tid(el("div", "sw-rating-done"), "widget-rating-done");
  var stars = el("div", "sw-stars"), chosen = 0, ratingFor = null;
  stars.setAttribute("role", "group"); stars.setAttribute("aria-label", t("Rate this conversation"));
  var starButtons = [1, 2, 3, 4, 5].map(function (n) {
    var b = tid(el("button", "sw-star", "★"), "widget-rating-star"); b.type = "button"; b.dataset.score = String(n);
    b.setAttribute("aria-label", t("{n} of 5 stars", {n: n})); b.setAttribute("aria-pressed", "false");
    b.addEventListener("click", function () { choose(n); });
    stars.appendChild(b); return b;
  });
  var comment = tid(el("textarea", "sw-rating-comment"), "widget-rating-comment");
  comment.rows = 2; comment.maxLength = 1000; comment.placeholder = t("Tell us more (optional)");
  comment.setAttribute("aria-label", t("Tell us more (optional)"));
  var rate = tid(el("button", "sw-rating-send", t("Send rating")), "widget-rating-send"); rate.type = "button";
  var ratingError = tid(el("p", "sw-rating-error"), "widget-rating-error"); ratingError.setAttribute("role", "alert"); ratingError.hidden = true;
  [el("p", "sw-rating-title", t("How did we do?")), stars, comment, rate, ratingError].forEach(function (n) { ratingForm.appendChild(n); });
  var doneText = el("span", "sw-rating-thanks"), change = tid(el("button", "sw-rating-change", t("Change")), "widget-rating-change");
  change.type = "button"; ratingDone.appendChild(doneText); ratingDone.appendChild(change);
  rating.appendChild(ratingForm); rating.appendChild(ratingDone);
  transcript.appendChild(rating);
  function choose(n) {
    chosen = n;
    starButtons.forEach(function (b, i) { b.setAttribute("aria-pressed", String(i < n)); b.classList.toggle("sw-star--on", i < n); });
  }
  function showRating(given) {
    rating.hidden = false;
    ratingForm.hidden = !!given; ratingDone.hidden = !given; ratingError.hidden = true;
    if (given) {
      doneText.textContent = t("Thank you for your rating.") + " " + t("You rated this conversation {n} of 5.", {n: given.score});
      rating.dataset.score = String(given.score);
    }
    if (pinned) toBottom(false);
  }
  function clearRating() { // another conversation: no stars, no comment, nothing offered until the desk says so
    choose(0); comment.value = ""; ratingFor = null;
    rating.hidden = true; ratingError.hidden = true; delete rating.dataset.score;
  }
  function offerRating() {
    var c = conv;
    if (!c) return;
    api("conversations/" + c.id + "/rating", {headers: {Authorization: "Bearer " + c.token}}).then(function (body) {
      if (c !== conv) return;
      if (ratingFor !== c.id) clearRating(); // what was chosen for another conversation is not this one's
      ratingFor = c.id;
      if (body.rating) { choose(body.rating.score); comment.value = body.rating.comment || ""; showRating(body.rating); }
      else if (body.offered) showRating(null);
      else rating.hidden = true;
    }, function () { /* offered again after the next event */ });
  }
  rate.addEventListener("click", function () {
    if (!chosen) { ratingError.textContent = t("Choose 1 to 5 stars first."); ratingError.hidden = false; return; }
    var c = conv; rate.disabled = true;
    api("conversations/" + c.id + "/rating", {method: "POST", headers: {"Content-Type": "application/json", Authorization: "Bearer " + c.token},
      body: JSON.stringify({score: chosen, comment: comment.value})})
      .then(function (body) { if (c === conv) showRating(body.rating); },
        function (e) { ratingError.textContent = t("We couldn't save your rating. ") + e.message; ratingError.hidden = false; })
      .finally(function () { rate.disabled = false; });
  });
  change.addEventListener("click", function () { ratingForm.hidden = false; ratingDone.hidden = true; starButtons[Math.max(chosen, 1) - 1].focus(); });
  composer.addEventListener("submit", function () { if (ratingDone.hidden) rating.hidden = true; }); // writing again: not now

  // The customer's language, for the desk's own texts and the model: told once per conversation on this page.
  var toldLanguage = {};
  function tellLanguage() {
    var c = conv;
    if (!c || toldLanguage[c.id]) return;
    toldLanguage[c.id] = true;
    api("conversations/" + c.id + "/language", {method: "POST", headers: {"Content-Type": "application/json", Authorization: "Bearer " + c.token},
      body: JSON.stringify({language: LANG})}).catch(function () { delete toldLanguage[c.id]; });
  }
  function fitEvent(ev) { // the live events this part reads besides handle()'s own
    if (ev.type === "staff.typing") showTyping(ev.name);
    else if (ev.type === "message.saved" && ev.message && ev.message.author === "staff") stopTyping();
    else if (ev.type === "replay.done") offerRating();
    else if (ev.type === "run.status" && ev.status === "stopped" && ev.outcome === "resolved") offerRating();
    else if (ev.type === "conversation.assigned" && ev.status === "taken_over" && ratingDone.hidden) rating.hidden = true;
  }

  // -- conversations that outlive the tab: past conversations, the e-mailed link's page -----------------
  // The browser's IANA time zone goes with every start, so the agent writes times in the customer's own.
  function withZone(body) {
    var copy = {}, zone = null;
    Object.keys(body).forEach(function (k) { copy[k] = body[k]; });
    try { zone = Intl.DateTimeFormat().resolvedOptions().timeZone; } catch (e) { /* an old browser: UTC */ }
    if (zone) copy.time_zone = zone;
    return copy;
  }
  var HISTORY_STATUS = {open: "Open", needs_attention: "Waiting for our team", taken_over: "With our team", closed: "Closed"};
  var historyView = null;
  var historyBtn = tid(el("button", "sw-history-button"), "widget-history-button");
  historyBtn.type = "button"; historyBtn.setAttribute("aria-label", t("Your conversations"));
  historyBtn.title = t("Your conversations"); historyBtn.setAttribute("aria-expanded", "false");
  historyBtn.appendChild(svg("M4 6h16v2H4zm0 5h16v2H4zm0 5h10v2H4z"));
  historyBtn.hidden = !(identity && identity.customer_token); // only the shop's signed-in customer has a history
  header.insertBefore(historyBtn, closeBtn);
  historyBtn.addEventListener("click", function () { if (historyView) hideHistory(); else showHistory(); });

  function hideHistory() {
    if (historyView) { historyView.remove(); historyView = null; }
    delete panel.dataset.view; historyBtn.setAttribute("aria-expanded", "false");
  }
  function showHistory() {
    hideError();
    historyView = tid(el("section", "sw-history"), "widget-history");
    historyView.setAttribute("aria-label", t("Your conversations"));
    var fresh = tid(el("button", "sw-history-new", t("Start a new conversation")), "widget-new-conversation");
    fresh.type = "button"; fresh.addEventListener("click", startFresh);
    var rows = el("ul", "sw-history-list"), note = el("p", "sw-history-note", t("Loading your conversations…"));
    [el("h3", "sw-history-title", t("Your conversations")), fresh, note, rows].forEach(function (n) { historyView.appendChild(n); });
    panel.insertBefore(historyView, header.nextSibling);
    panel.dataset.view = "history"; historyBtn.setAttribute("aria-expanded", "true");
    var view = historyView;
    api("conversations/history", {method: "POST", headers: {"Content-Type": "application/json"},
      body: JSON.stringify({customer_token: identity.customer_token})}).then(function (body) {
      if (view !== historyView) return;
      note.textContent = body.conversations.length ? "" : t("No earlier conversations yet.");
      note.hidden = body.conversations.length > 0;
      body.conversations.forEach(function (c) { rows.appendChild(historyRow(c)); });
    }, function (e) { if (view === historyView) note.textContent = t("We couldn't load your conversations. ") + e.message; });
  }
  function historyRow(c) {
    var li = el("li"), b = tid(el("button", "sw-history-row"), "widget-history-row");
    b.type = "button"; b.dataset.conversation = c.id;
    if (conv && conv.id === c.id) { b.setAttribute("aria-current", "true"); b.classList.add("sw-history-row--current"); }
    var when = new Date(c.updated_at || c.created_at);
    var head = el("span", "sw-history-when", when.toLocaleDateString(LOCALE, {weekday: "short", day: "numeric", month: "short"}) +
      ", " + when.toLocaleTimeString(LOCALE, {hour: "2-digit", minute: "2-digit"}));
    var state = el("span", "sw-history-status", (conv && conv.id === c.id) ? t("This conversation") : t(HISTORY_STATUS[c.status] || ""));
    var last = c.last_message || {};
    var who = last.author === "customer" ? t("You: ") : last.author === "staff" ? t("Our team: ") : "";
    var text = el("span", "sw-history-text", who + (last.text || ""));
    [head, state, text].forEach(function (n) { b.appendChild(n); });
    b.addEventListener("click", function () { openPast(c.id); });
    li.appendChild(b);
    return li;
  }
  function leaveConversation() { // the socket of the conversation on screen is closed without a reconnect
    var old = ws; ws = null; ready = false; replaying = false; awaitingPong = false;
    clearTimeout(retryTimer); clearInterval(pingTimer); clearTimeout(idleTimer);
    if (old) { old.onclose = null; old.close(); }
    pending.length = 0; reset(); attempt = 0; reconnecting.hidden = true;
  }
  function openPast(id) {
    if (conv && conv.id === id) return hideHistory();
    api("conversations/open", {method: "POST", headers: {"Content-Type": "application/json"},
      body: JSON.stringify(withZone({customer_token: identity.customer_token, conversation: id}))}).then(function (body) {
      leaveConversation(); hideHistory();
      conv = {id: body.conversation.id, token: body.token};
      storage.set({id: conv.id, token: conv.token});
      connect(); input.focus();
    }, function (e) { showError("We couldn't open that conversation. " + e.message); });
  }
  function startFresh() { // the next message starts a new conversation; the old one stays in the list
    leaveConversation(); hideHistory();
    storage.drop(); conv = null;
    suggestions.hidden = false; panel.dataset.connection = "new";
    input.focus();
  }
  if (CONVERSATION_LINK) { // the desk's own page for an e-mailed link: the conversation fills it, open from the start
    root.classList.add("sw-root--page");
    setTimeout(open, 0);
  }

  renderState();
  function mount() { document.body.appendChild(host); }
  if (document.body) mount(); else document.addEventListener("DOMContentLoaded", mount);

  window.SundryWidget = {open: open, close: close, _renderMarkdown: renderMarkdown};
  }
})();
