"""The plan page's one style sheet, inline in the page (docs/plan-page.md): system fonts, colours
for light and dark mode (`prefers-color-scheme`), sections off screen left unrendered until
scrolled to (`content-visibility`: a page of a hundred models shows at once), and print rules
(colours kept, every section rendered, every folded
part open, no section split across pages)."""

#: One colour per part of a device's bytes (`report_records.PARTS`) and per KV-cache type, then the
#: page's own; the dark values follow.
STYLE = """
:root{color-scheme:light dark;--bg:#fff;--fg:#1c2230;--muted:#5d6675;--line:#d5dae2;--card:#f4f6f9;
--weights:#3567d4;--kv_state:#e08a1e;--compute:#8652c4;--projector:#15998a;--runtime:#6f7a8c;--base:#a9b2bf;
--draft:#d04f93;--other:#94744c;--margin:#c93d3d;--budget:#c93d3d;--over:#c93d3d;--ok:#23814f}
@media (prefers-color-scheme:dark){:root{--bg:#13161b;--fg:#e3e6eb;--muted:#98a2b1;--line:#343b46;
--card:#1c2028;--weights:#5f8ff2;--kv_state:#f0a040;--compute:#a77be0;--projector:#2fb8a6;--runtime:#8893a5;
--base:#5b6473;--draft:#e472b0;--other:#b08f63;--margin:#ee6262;--budget:#ee6262;--over:#ee6262;--ok:#4cc083}}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--fg);font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,
"Helvetica Neue",Arial,sans-serif}
header,main{max-width:1120px;margin:0 auto;padding:0 18px}
header{padding-top:18px;border-bottom:1px solid var(--line)}
h1{font-size:22px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 8px;padding-top:6px;border-top:2px solid var(--line)}
h3{font-size:15px;margin:18px 0 6px}h4{font-size:13px;margin:12px 0 4px;color:var(--muted)}
p{margin:4px 0}.muted{color:var(--muted)}code,.path{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;
font-size:12px;word-break:break-all}
nav{margin:8px 0 12px}nav a{margin-right:14px;color:inherit}
a{color:var(--weights)}
table{border-collapse:collapse;margin:6px 0 10px;font-size:13px}
th,td{border-bottom:1px solid var(--line);padding:3px 8px;text-align:left;vertical-align:top}
th{color:var(--muted);font-weight:600}td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
.legend{display:flex;flex-wrap:wrap;gap:4px 14px;margin:6px 0 10px;font-size:12px}
.legend span:before{content:"";display:inline-block;width:11px;height:11px;margin-right:5px;vertical-align:-1px;
background:var(--swatch);border-radius:2px}
.gpu,.set,article{border:1px solid var(--line);border-radius:6px;padding:8px 12px;margin:10px 0;background:var(--bg)}
.set,article{content-visibility:auto;contain-intrinsic-size:auto 360px}
.row{display:grid;grid-template-columns:minmax(160px,260px) 1fr 170px;gap:10px;align-items:center;margin:3px 0}
.row .label{overflow:hidden;text-overflow:ellipsis;white-space:nowrap;font-size:12px}
.row .total{text-align:right;font-variant-numeric:tabular-nums;font-size:12px}
.bar{position:relative;display:flex;height:16px;background:var(--card);border:1px solid var(--line);border-radius:3px}
.bar>i{display:block;height:100%;min-width:0}
.bar>b{position:absolute;top:-4px;bottom:-4px;border-left:2px dashed var(--budget)}
.p-weights{background:var(--weights)}.p-kv_state{background:var(--kv_state)}.p-compute{background:var(--compute)}
.p-projector{background:var(--projector)}.p-runtime{background:var(--runtime)}.p-base{background:var(--base)}
.p-draft{background:var(--draft)}.p-other{background:var(--other)}
.p-margin{background:repeating-linear-gradient(45deg,var(--margin) 0 3px,transparent 3px 6px)}
.m0{background:var(--weights)}.m1{background:var(--kv_state)}.m2{background:var(--compute)}
.m3{background:var(--projector)}.m4{background:var(--draft)}.m5{background:var(--other)}
.sw{display:inline-block;width:9px;height:9px;border-radius:2px;margin:0 4px 0 2px;vertical-align:0}
.over{color:var(--over);font-weight:600}.ok{color:var(--ok)}
.badge{display:inline-block;border:1px solid var(--line);border-radius:9px;padding:0 7px;font-size:11px;
color:var(--muted);margin-left:6px;font-weight:400}
dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 14px;margin:6px 0}dt{color:var(--muted)}dd{margin:0}
.cols{display:flex;flex-wrap:wrap;gap:8px 28px;align-items:flex-start}
svg.chart{width:340px;height:190px;font-size:10px;overflow:visible}
svg.chart text{fill:var(--muted)}svg.chart .axis{stroke:var(--line)}
svg.chart .budget{stroke:var(--budget);stroke-dasharray:5 3}
svg.chart polyline,svg.chart .key{fill:none;stroke-width:2}
svg.chart .k0{stroke:var(--weights)}svg.chart .k1{stroke:var(--kv_state)}
svg.chart .k2{stroke:var(--compute)}svg.chart .k3{stroke:var(--projector)}
svg.chart circle{fill:var(--fg);stroke:var(--bg);stroke-width:2}
details{margin:4px 0}summary{cursor:pointer;color:var(--muted)}
ul.apart{margin:4px 0;padding-left:18px;font-size:12px}
@media print{body{font-size:11px}nav{display:none}header,main{max-width:none}.set,article{content-visibility:visible}
*{-webkit-print-color-adjust:exact;print-color-adjust:exact}
.gpu,.set,article,table,figure{break-inside:avoid}h2,h3{break-after:avoid}
details::details-content{content-visibility:visible;display:contents}summary{display:none}}
"""
